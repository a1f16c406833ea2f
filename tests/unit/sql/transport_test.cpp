// doctor's tls line (src/core/sql/transport.cpp): a password crossing a network unencrypted,
// or TLS that does not verify the server, is a warning; loopback and verified TLS are not.

#include <doctest/doctest.h>

#include "core/sql/sql_session.hpp"

using namespace dblock;
using sql::Transport;

namespace {

Transport link(bool local, bool encrypted, bool password) {
  Transport t;
  t.local = local;
  t.peer = local ? "127.0.0.1" : "10.1.2.3";
  t.encrypted = encrypted;
  t.password = password;
  t.how_to_verify = "sslmode=verify-full and sslrootcert=FILE";
  if (encrypted) {
    t.protocol = "TLSv1.3";
    t.cipher = "TLS_AES_256_GCM_SHA384";
  }
  return t;
}

}  // namespace

TEST_CASE("transport: a password over a network without TLS is a warning, not a failure") {
  const DoctorCheck c = sql::transport_check(link(false, false, true));
  CHECK(c.name == "tls");
  CHECK(c.ok);
  CHECK(c.warn);
  CHECK(c.detail.find("password crosses the network to 10.1.2.3 unencrypted") != std::string::npos);
  CHECK(c.detail.find("sslmode=verify-full") != std::string::npos);
}

TEST_CASE("transport: loopback or a Unix socket without TLS is no warning, with or without a password") {
  for (bool password : {true, false}) {
    const DoctorCheck c = sql::transport_check(link(true, false, password));
    CHECK(c.ok);
    CHECK_FALSE(c.warn);
    CHECK(c.detail.find("not encrypted; 127.0.0.1 is on this host") == 0);
  }
}

TEST_CASE("transport: no password over a network without TLS is said, not warned") {
  const DoctorCheck c = sql::transport_check(link(false, false, false));
  CHECK(c.ok);
  CHECK_FALSE(c.warn);
  CHECK(c.detail.find("not encrypted") == 0);
}

TEST_CASE("transport: TLS verified against a CA and the host name, over a network: no warning") {
  Transport t = link(false, true, true);
  t.ca_verified = t.host_verified = true;
  const DoctorCheck c = sql::transport_check(t);
  CHECK_FALSE(c.warn);
  CHECK(c.detail == "encrypted (TLSv1.3, TLS_AES_256_GCM_SHA384) to 10.1.2.3; the server's certificate was verified "
                    "against a CA and the host name");
}

TEST_CASE("transport: TLS that does not check the host name, over a network: a warning") {
  Transport t = link(false, true, true);
  t.ca_verified = true;
  DoctorCheck c = sql::transport_check(t);
  CHECK(c.warn);
  CHECK(c.detail.find("verified against a CA but not the host name") != std::string::npos);
  t.ca_verified = false;
  c = sql::transport_check(t);
  CHECK(c.warn);
  CHECK(c.detail.find("was not verified") != std::string::npos);
  // On loopback the same is only said.
  t.local = true;
  CHECK_FALSE(sql::transport_check(t).warn);
}

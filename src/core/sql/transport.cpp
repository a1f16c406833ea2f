// doctor's tls line (dblock(1), doctor): what protects the link to the server.

#include "core/sql/sql_session.hpp"

namespace dblock::sql {

DoctorCheck transport_check(const Transport& t) {
  const std::string fix = "require TLS with a verified certificate in the DSN" +
                          (t.how_to_verify.empty() ? std::string() : " (" + t.how_to_verify + ")");
  if (!t.encrypted) {
    if (t.local) return {"tls", true, "not encrypted; " + t.peer + " is on this host, so nothing crosses a network"};
    if (t.password)
      return {"tls", true, "not encrypted, and the password crosses the network to " + t.peer + " unencrypted: " + fix,
              true};
    return {"tls", true, "not encrypted: lock rows cross the network to " + t.peer + " unencrypted; " + fix};
  }
  std::string what = "encrypted (" + (t.protocol.empty() ? std::string("TLS") : t.protocol) +
                     (t.cipher.empty() ? "" : ", " + t.cipher) + ") to " + t.peer;
  if (t.ca_verified && t.host_verified)
    return {"tls", true, what + "; the server's certificate was verified against a CA and the host name"};
  const std::string unchecked = t.ca_verified ? "; the server's certificate was verified against a CA but not the host name"
                                              : "; the server's certificate was not verified (no CA, no host name)";
  if (t.local) return {"tls", true, what + unchecked};
  return {"tls", true, what + unchecked + ", so a machine in the middle can pose as the server: " + fix, true};
}

}  // namespace dblock::sql

#include <doctest/doctest.h>

#include "cli/argv_scrub.hpp"
#include "core/dsn.hpp"
#include "core/exit_code.hpp"

using namespace dblock;

TEST_CASE("sqlite DSNs") {
  CHECK(parse_dsn("sqlite:/var/lib/x.db").value().path == "/var/lib/x.db");
  CHECK(parse_dsn("sqlite:///var/lib/x.db").value().path == "/var/lib/x.db");
  CHECK(parse_dsn("sqlite:rel/x.db").value().path == "rel/x.db");
  CHECK(parse_dsn("sqlite:/x.db").value().backend == "sqlite");
  auto empty = parse_dsn("sqlite:");
  REQUIRE_FALSE(empty.has_value());
  CHECK(empty.error().kind == ErrorKind::config);
}

TEST_CASE("mysql DSNs") {
  auto d = parse_dsn("mysql://app:s%40cret@db.example:3307/jobs?ssl-mode=REQUIRED&connect-timeout=3").value();
  CHECK(d.backend == "mysql");
  CHECK(d.user == "app");
  CHECK(d.password.value() == "s@cret");
  CHECK(d.host == "db.example");
  CHECK(d.port.value() == 3307);
  CHECK(d.database == "jobs");
  CHECK(d.param("ssl-mode").value() == "REQUIRED");
  CHECK(d.param("connect-timeout").value() == "3");
  CHECK(d.redacted == "mysql://app:****@db.example:3307/jobs?ssl-mode=REQUIRED&connect-timeout=3");

  auto m = parse_dsn("mariadb://localhost/jobs").value();
  CHECK(m.backend == "mysql");
  CHECK_FALSE(m.password.has_value());
  CHECK_FALSE(m.port.has_value());

  auto v6 = parse_dsn("mysql://u@[::1]:3306/db").value();
  CHECK(v6.host == "::1");
  CHECK(v6.port.value() == 3306);

  auto sock = parse_dsn("mysql:///db?socket=/run/mysqld/mysqld.sock").value();
  CHECK(sock.param("socket").value() == "/run/mysqld/mysqld.sock");
}

TEST_CASE("bad mysql DSNs are config errors without the password") {
  for (const char* bad : {"mysql://u:topsecret@h/db?unknown=1", "mysql://u:topsecret@h:99999/db",
                          "mysql://u:topsecret@h:abc/db", "mysql://u:topsecret@h/", "mysql://u:topsecret@h/db?ssl-mode=SOMETIMES",
                          "mysql://u:top%zzsecret@h/db"}) {
    CAPTURE(bad);
    auto r = parse_dsn(bad);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().kind == ErrorKind::config);
    CHECK(r.error().message.find("topsecret") == std::string::npos);
    CHECK(r.error().message.find("top%zzsecret") == std::string::npos);
  }
}

TEST_CASE("postgres DSNs are kept whole for libpq, and redacted") {
  auto d = parse_dsn("postgres://app:pw@db/jobs?sslmode=require").value();
  CHECK(d.backend == "postgres");
  CHECK(d.text == "postgres://app:pw@db/jobs?sslmode=require");
  CHECK(d.redacted == "postgres://app:****@db/jobs?sslmode=require");
  CHECK(parse_dsn("postgresql://db/jobs").value().backend == "postgres");
  CHECK(redact_dsn("postgres://db/jobs?user=a&password=hunter2&sslmode=require") ==
        "postgres://db/jobs?user=a&password=****&sslmode=require");
  CHECK(redact_dsn("host=db password='x y' user=a") == "host=db password=**** user=a");
  CHECK(redact_dsn("postgres://db/jobs") == "postgres://db/jobs");
}

TEST_CASE("unknown schemes are config errors") {
  for (const char* bad : {"", "redis://x", "/var/lib/x.db", "sqlite3:/x"}) {
    CAPTURE(bad);
    auto r = parse_dsn(bad);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().kind == ErrorKind::config);
    CHECK(exit_code_for(r.error().kind) == 78);
  }
}

TEST_CASE("default DSN is SQLite") {
  CHECK(default_dsn().rfind("sqlite:", 0) == 0);
  CHECK(default_dsn().find("dblock.db") != std::string::npos);
}

TEST_CASE("passwords are scrubbed from argv in place") {
  char a0[] = "dblock";
  char a1[] = "--dsn=mysql://app:hunter2@db/jobs";
  char a2[] = "postgres://u:p@h/d";
  char a3[] = "nightly";
  char* argv[] = {a0, a1, a2, a3, nullptr};
  CHECK(cli::scrub_passwords_from_argv(4, argv));
  CHECK(std::string(argv[1]) == "--dsn=mysql://app:*******@db/jobs");
  CHECK(std::string(argv[2]) == "postgres://u:*@h/d");
  CHECK(std::string(argv[3]) == "nightly");
  CHECK_FALSE(cli::scrub_passwords_from_argv(4, argv));
}

TEST_CASE("exit codes have one home") {
  CHECK(exit_code_for(ErrorKind::busy) == 75);
  CHECK(exit_code_for(ErrorKind::lost) == 76);
  CHECK(exit_code_for(ErrorKind::connection) == 69);
  CHECK(exit_code_for(ErrorKind::other) == 69);
  CHECK(exit_code_for(ErrorKind::config) == 78);
  CHECK(exit_code_for(ErrorKind::usage) == 64);
  CHECK(exit_code_for(ErrorKind::internal) == 70);
}

#include <doctest/doctest.h>

#include "cli/argv_scrub.hpp"
#include "backends/common/dsn.hpp"
#include "backends/mysql/mysql_dsn.hpp"
#include "backends/registry.hpp"
#include "backends/sqlite/sqlite_dsn.hpp"

using namespace dblock;

TEST_CASE("sqlite DSNs") {
  auto path = [](const char* text) { return sqlite::database_path(parse_dsn(text).value()).value(); };
  CHECK(path("sqlite:/var/lib/x.db") == "/var/lib/x.db");
  CHECK(path("sqlite:///var/lib/x.db") == "/var/lib/x.db");
  // Relative paths and host parts are refused (78), with the forms that work.
  for (const char* bad : {"sqlite:rel/x.db", "sqlite://tmp/x.db", "sqlite://host/abs/x.db", "sqlite:./x.db"}) {
    auto refused = parse_dsn(bad);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().kind == ErrorKind::config);
    CHECK(refused.error().message.find("sqlite:/abs/path or sqlite:///abs/path") != std::string::npos);
  }
  CHECK(parse_dsn("sqlite://tmp/x.db").error().message.find("no host part ('tmp')") != std::string::npos);
  CHECK(parse_dsn("sqlite:/x.db").value().backend == "sqlite");
  auto empty = parse_dsn("sqlite:");
  REQUIRE_FALSE(empty.has_value());
  CHECK(empty.error().kind == ErrorKind::config);
}

TEST_CASE("mysql DSNs") {
  auto dsn = parse_dsn("mysql://app:s%40cret@db.example:3307/jobs?ssl-mode=required&connect-timeout=3").value();
  CHECK(dsn.backend == "mysql");
  CHECK(dsn.redacted == "mysql://app:****@db.example:3307/jobs?ssl-mode=required&connect-timeout=3");
  auto d = mysql::parse_mysql_dsn(dsn).value();
  CHECK(d.user == "app");
  CHECK(d.password.value() == "s@cret");
  CHECK(d.host == "db.example");
  CHECK(d.port.value() == 3307);
  CHECK(d.database == "jobs");
  CHECK(d.ssl_mode.value() == "REQUIRED");
  CHECK(d.connect_timeout_s.value() == 3);
  CHECK(d.option_group == "dblock");

  CHECK(parse_dsn("mariadb://localhost/jobs").value().backend == "mysql");
  auto m = mysql::parse_mysql_dsn(parse_dsn("mariadb://localhost/jobs").value()).value();
  CHECK_FALSE(m.password.has_value());
  CHECK_FALSE(m.port.has_value());

  auto v6 = mysql::parse_mysql_dsn(parse_dsn("mysql://u@[::1]:3306/db").value()).value();
  CHECK(v6.host == "::1");
  CHECK(v6.port.value() == 3306);

  auto sock = mysql::parse_mysql_dsn(parse_dsn("mysql:///db?socket=/run/mysqld/mysqld.sock").value()).value();
  CHECK(sock.socket.value() == "/run/mysqld/mysqld.sock");
}

TEST_CASE("bad mysql DSNs are config errors without the password") {
  for (const char* bad : {"mysql://u:topsecret@h/db?unknown=1", "mysql://u:topsecret@h:99999/db",
                          "mysql://u:topsecret@h:abc/db", "mysql://u:topsecret@h/", "mysql://u:topsecret@h/db?ssl-mode=SOMETIMES",
                          "mysql://u:top%zzsecret@h/db", "mysql://u:topsecret@h/db?connect-timeout=0"}) {
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
  }
}

TEST_CASE("default DSN is SQLite under the state directory") {
  auto location = default_location();
  REQUIRE(location.has_value());
  CHECK(location->dsn.rfind("sqlite:" + location->state_dir + "/", 0) == 0);
  CHECK(location->dsn.find("dblock.db") != std::string::npos);
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

TEST_CASE("postgres DSNs are checked by libpq when read, and its message never shows the password") {
  auto r = parse_dsn("postgres://u:top%zzsecret@h/db");
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().kind == ErrorKind::config);
  CHECK(r.error().message.find("zzsecret") == std::string::npos);
  CHECK(parse_dsn("postgres:/db").error().kind == ErrorKind::config);
}

TEST_CASE("one function finds passwords: messages and argv hide the same bytes") {
  const std::string text = "postgres://u:p%40ss@h/d?password=two&user=x";
  CHECK(redact_dsn(text) == "postgres://u:****@h/d?password=****&user=x");
  CHECK(redact_message("failed for \"p@ss\" and two", text) == "failed for \"****\" and ****");
  CHECK(redact_message("no secrets here", "sqlite:/x.db") == "no secrets here");
  auto ranges = password_ranges(text);
  REQUIRE(ranges.size() == 2);
  CHECK(text.substr(ranges[0].first, ranges[0].second - ranges[0].first) == "p%40ss");
  CHECK(text.substr(ranges[1].first, ranges[1].second - ranges[1].first) == "two");
}

TEST_CASE("passwords are found where libpq finds them") {
  // libpq ends the user info at the '@' before the first '/', so a '?' is part of the password.
  const std::string question = "postgres://alice:se?cret@127.0.0.1:1/db";
  CHECK(redact_dsn(question) == "postgres://alice:****@127.0.0.1:1/db");
  CHECK(parse_dsn(question).value().has_password());
  // A raw '@' in the password: libpq would end the user info at the first one, so the DSN is
  // refused and everything up to the last one hidden.
  CHECK(redact_dsn("postgres://alice:p@ss@h/db?sslmode=require") == "postgres://****@h/db?sslmode=require");
  // libpq decodes a parameter's name before comparing it.
  CHECK(redact_dsn("postgres://alice@h/db?pass%77ord=hunter2&sslmode=require") ==
        "postgres://alice@h/db?pass%77ord=****&sslmode=require");
  CHECK(redact_dsn("postgres://alice@h/db?x=1&%70assword=hunter2") == "postgres://alice@h/db?x=1&%70assword=****");
  CHECK(redact_dsn("postgres://h/db?application_name=password") == "postgres://h/db?application_name=password");
  char a0[] = "dblock";
  char a1[] = "postgres://alice:se?cret@h/db";
  char a2[] = "--dsn=postgres://alice@h/db?pass%77ord=hunter2";
  char* argv[] = {a0, a1, a2, nullptr};
  CHECK(cli::scrub_passwords_from_argv(3, argv));
  CHECK(std::string(argv[1]) == "postgres://alice:*******@h/db");
  CHECK(std::string(argv[2]) == "--dsn=postgres://alice@h/db?pass%77ord=*******");
  // MySQL DSNs split their user info the same way.
  auto m = mysql::parse_mysql_dsn(parse_dsn("mysql://u:se?cret@h/db?ssl-mode=required").value()).value();
  CHECK(m.password.value() == "se?cret");
  CHECK(m.host == "h");
  CHECK(m.ssl_mode.value() == "REQUIRED");
}

TEST_CASE("a short password leaves messages whole") {
  auto r = parse_dsn("mysql://u:p@h:99999/db");
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().message == "invalid DSN 'mysql://u:****@h:99999/db': port out of range");
  const std::string dsn = "postgres://u:p@h/d";
  CHECK(redact_message("password p refused for postgres://u:p@h/d (port 5432)", dsn) ==
        "password **** refused for postgres://u:****@h/d (port 5432)");
  CHECK(redact_message("\"p\" is wrong", dsn) == "\"****\" is wrong");
}

TEST_CASE("a password with a raw '/' or '@' is hidden whole, and the DSN refused before any client reads it") {
  // Base64 passwords hold '/', '+' and '='; with '#', '?' and spaces too, in both schemes.
  for (const char* password : {"Ab+/cd=Xy9", "Qw3/Rt5#Zx7", "Qw3?Rt5/Zx7", "Qw3 Rt5/Zx7", "Qw3@Rt5@Zx7",
                               "Qw3/Rt5@Zx7", "/Qw3Rt5", "Qw3Rt5/"}) {
    for (const char* scheme : {"postgres", "postgresql", "mysql", "mariadb"}) {
      const std::string text = std::string(scheme) + "://dblock:" + password + "@127.0.0.1:1/dbx";
      CAPTURE(text);
      CHECK(redact_dsn(text) == std::string(scheme) + "://****@127.0.0.1:1/dbx");
      auto r = parse_dsn(text);
      REQUIRE_FALSE(r.has_value());
      CHECK(r.error().kind == ErrorKind::config);
      CHECK(r.error().message.starts_with("invalid DSN '" + std::string(scheme) + "://****@127.0.0.1:1/dbx': "));
      CHECK(r.error().message.find("%2F") != std::string::npos);
      // No piece of the password, whatever splits it.
      for (const char* piece : {"Ab+", "cd=", "Xy9", "Qw3", "Rt5", "Zx7"})
        CHECK(r.error().message.find(piece) == std::string::npos);
      char a0[] = "dblock";
      std::string arg = "--dsn=" + text;
      char* argv[] = {a0, arg.data(), nullptr};
      CHECK(cli::scrub_passwords_from_argv(2, argv));
      CHECK(std::string(argv[1]).find_first_of("QARZXc") == std::string::npos);
    }
  }
  // A message that quotes a piece of the DSN: every password as written, not only the parsed one.
  CHECK(redact_message("invalid integer value \"Ab+/cd=Xy9\"", "postgres://u:Ab+/cd=Xy9@h:1/d") ==
        "invalid integer value \"****\"");
  // Percent-encoded, the same passwords are read whole and work.
  auto m = mysql::parse_mysql_dsn(parse_dsn("mysql://u:Ab+%2Fcd=Xy9%40%23%3F%20@h/db").value()).value();
  CHECK(m.password.value() == "Ab+/cd=Xy9@#? ");
  CHECK(m.host == "h");
  CHECK(parse_dsn("postgres://u:Ab+%2Fcd=Xy9%40@h/db").has_value());
  // '#', '?' and a space alone are read alike by every client: kept, and hidden.
  for (const char* text : {"postgres://u:Qw3#Rt5@h/db", "postgres://u:Qw3 Rt5@h/db", "mysql://u:Qw3?Rt5@h/db"}) {
    CAPTURE(text);
    CHECK(parse_dsn(text).has_value());
    CHECK(redact_dsn(text).find("Rt5") == std::string::npos);
  }
  // A URI parameter's value ends at '&' only.
  CHECK(redact_dsn("postgres://h/db?password=Qw3 Rt5&sslmode=require") ==
        "postgres://h/db?password=****&sslmode=require");
  // No ':' before the '@': no password, and an '@' in a parameter is left alone.
  CHECK(!misread_user_info("postgres://h/db?application_name=a@b"));
  CHECK(parse_dsn("postgres://h/db?application_name=a@b").has_value());
  CHECK(!misread_user_info("sqlite:///var/lib/a:b@c.db"));
}

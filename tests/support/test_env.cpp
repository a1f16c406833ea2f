#include "support/test_env.hpp"

#include <libpq-fe.h>
#include <mysql.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>

#include "backends/registry.hpp"

namespace dblock::test {
namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

std::string random_suffix() {
  static std::mt19937_64 rng{std::random_device{}() ^ static_cast<std::uint64_t>(getpid())};
  static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string out;
  for (int i = 0; i < 8; ++i) out += alphabet[rng() % (sizeof(alphabet) - 1)];
  return out;
}

// The pieces of a server DSN as scripts/test-servers.sh writes them:
// scheme://user[:password]@host[:port]/database[?params]. Test DSNs only (no percent-decoding).
struct Uri {
  std::string scheme, user, password, host, port, database, query;

  static Uri parse(const std::string& text) {
    Uri u;
    const auto sep = text.find("://");
    if (sep == std::string::npos) throw std::runtime_error("test DSN is not a URI");
    u.scheme = text.substr(0, sep);
    std::string rest = text.substr(sep + 3);
    if (const auto q = rest.find('?'); q != std::string::npos) {
      u.query = rest.substr(q + 1);
      rest.erase(q);
    }
    if (const auto slash = rest.find('/'); slash != std::string::npos) {
      u.database = rest.substr(slash + 1);
      rest.erase(slash);
    }
    if (const auto at = rest.rfind('@'); at != std::string::npos) {
      const std::string info = rest.substr(0, at);
      rest.erase(0, at + 1);
      const auto colon = info.find(':');
      u.user = info.substr(0, colon);
      if (colon != std::string::npos) u.password = info.substr(colon + 1);
    }
    const auto colon = rest.rfind(':');
    u.host = rest.substr(0, colon);
    if (colon != std::string::npos) u.port = rest.substr(colon + 1);
    return u;
  }

  std::string text() const {
    std::string out = scheme + "://" + user;
    if (!password.empty()) out += ":" + password;
    out += "@" + host;
    if (!port.empty()) out += ":" + port;
    out += "/" + database;
    if (!query.empty()) out += "?" + query;
    return out;
  }
};

std::string sqlite_path() { return dsn().substr(std::string_view("sqlite:").size()); }

std::string sqlite_admin(const std::string& sql) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(sqlite_path().c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  std::unique_ptr<sqlite3, decltype(&sqlite3_close)> guard(db, &sqlite3_close);
  if (rc != SQLITE_OK) throw std::runtime_error("admin_sql: cannot open " + sqlite_path());
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK)
    throw std::runtime_error("admin_sql: " + std::string(sqlite3_errmsg(db)) + " in: " + sql);
  std::unique_ptr<sqlite3_stmt, decltype(&sqlite3_finalize)> stmt_guard(stmt, &sqlite3_finalize);
  const int step = sqlite3_step(stmt);
  if (step == SQLITE_ROW) {
    const auto* text = sqlite3_column_text(stmt, 0);
    return text ? reinterpret_cast<const char*>(text) : "";
  }
  if (step != SQLITE_DONE) throw std::runtime_error("admin_sql: " + std::string(sqlite3_errmsg(db)) + " in: " + sql);
  return "";
}

std::string mysql_admin(const std::string& sql) {
  const Uri u = Uri::parse(admin_dsn());
  std::unique_ptr<MYSQL, decltype(&mysql_close)> conn(mysql_init(nullptr), &mysql_close);
  if (!conn) throw std::runtime_error("admin_sql: mysql_init failed");
  unsigned timeout = 10;
  mysql_options(conn.get(), MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
  if (!mysql_real_connect(conn.get(), u.host.c_str(), u.user.c_str(), u.password.c_str(), u.database.c_str(),
                          u.port.empty() ? 3306 : static_cast<unsigned>(std::stoul(u.port)), nullptr, 0))
    throw std::runtime_error("admin_sql: cannot connect: " + std::string(mysql_error(conn.get())));
  if (mysql_query(conn.get(), sql.c_str()) != 0)
    throw std::runtime_error("admin_sql: " + std::string(mysql_error(conn.get())) + " in: " + sql);
  std::unique_ptr<MYSQL_RES, decltype(&mysql_free_result)> res(mysql_store_result(conn.get()), &mysql_free_result);
  if (!res) return "";
  MYSQL_ROW row = mysql_fetch_row(res.get());
  return row && row[0] ? row[0] : "";
}

std::string postgres_admin(const std::string& sql) {
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn(PQconnectdb(admin_dsn().c_str()), &PQfinish);
  if (PQstatus(conn.get()) != CONNECTION_OK)
    throw std::runtime_error("admin_sql: cannot connect: " + std::string(PQerrorMessage(conn.get())));
  std::unique_ptr<PGresult, decltype(&PQclear)> res(PQexec(conn.get(), sql.c_str()), &PQclear);
  const auto status = PQresultStatus(res.get());
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK)
    throw std::runtime_error("admin_sql: " + std::string(PQresultErrorMessage(res.get())) + " in: " + sql);
  if (status == PGRES_TUPLES_OK && PQntuples(res.get()) > 0 && !PQgetisnull(res.get(), 0, 0))
    return PQgetvalue(res.get(), 0, 0);
  return "";
}

}  // namespace

std::string backend_name() { return env_or("DBLOCK_TEST_BACKEND", "sqlite"); }

Strategy strategy() {
  auto s = parse_strategy(env_or("DBLOCK_TEST_STRATEGY", "lease"));
  if (!s) throw std::runtime_error("DBLOCK_TEST_STRATEGY is not a strategy");
  return *s;
}

std::string dsn() {
  const std::string backend = backend_name();
  if (backend == "sqlite") {
    static std::string path = [] {
      std::string dir = env_or("TMPDIR", "/tmp") + "/dblock-conformance-XXXXXX";
      if (!mkdtemp(dir.data())) throw std::runtime_error("mkdtemp failed");
      return dir + "/test.db";
    }();
    return "sqlite:" + path;
  }
  // DBLOCK_TEST_TLS=1 (the server cells, tests/CMakeLists.txt): dblock under test goes over TLS
  // with a verified server certificate and a client certificate.
  if (env_or("DBLOCK_TEST_TLS", "") == "1")
    return server_dsn(backend == "mysql" ? "DBLOCK_TEST_MYSQL_TLS_DSN" : "DBLOCK_TEST_POSTGRES_TLS_DSN");
  return admin_dsn();
}

std::string admin_dsn() {
  const std::string backend = backend_name();
  if (backend == "sqlite") return dsn();
  return server_dsn(backend == "mysql" ? "DBLOCK_TEST_MYSQL_DSN" : "DBLOCK_TEST_POSTGRES_DSN");
}

std::string server_dsn(const char* var) {
  std::string value = env_or(var, "");
  if (value.empty()) {
    bool ci = env_or("CI", "") == "true";
    std::fprintf(stderr, "%s is not set: no %s server to test against%s\n", var, backend_name().c_str(),
                 ci ? " (CI=true: this is a failure)" : " (skipped; scripts/test.sh starts one)");
    std::exit(ci ? 1 : 77);
  }
  return value;
}

std::string password() { return backend_name() == "sqlite" ? "" : Uri::parse(dsn()).password; }

std::string unique_prefix() { return "t" + random_suffix() + "_"; }

std::string unique_key(const std::string& stem) { return stem + "-" + random_suffix(); }

std::unique_ptr<Backend> open(const BackendOptions& options) { return open(options, dsn()); }

std::unique_ptr<Backend> open(const BackendOptions& options, const std::string& dsn_text) {
  auto parsed = parse_dsn(dsn_text);
  if (!parsed) throw std::runtime_error(parsed.error().message);
  auto backend = open_backend(*parsed, options);
  if (!backend) throw std::runtime_error(backend.error().message);
  return std::move(*backend);
}

std::vector<BrokenDsn> broken_dsns() {
  if (backend_name() == "sqlite") {
    const std::string dir = sqlite_path().substr(0, sqlite_path().rfind('/'));
    // A DSN whose directory is not one (or is missing) is a configuration mistake, named.
    const std::string file = dir + "/not-a-directory";
    if (FILE* f = std::fopen(file.c_str(), "w")) std::fclose(f);
    return {
        {"a file whose parent is a regular file", "sqlite:" + file + "/test.db", ErrorKind::config},
        {"a directory in place of the database file", "sqlite:" + dir, ErrorKind::connection},
    };
  }
  const Uri good = Uri::parse(dsn());
  Uri bad_password = good;
  bad_password.password = std::string(wrong_password);
  Uri bad_database = good;
  bad_database.database = "dblock_no_such_db";
  Uri closed_port = good;
  closed_port.port = "1";  // nothing listens on port 1 of the loopback
  closed_port.password = std::string(wrong_password);
  return {
      {"wrong password", bad_password.text(), ErrorKind::config},
      {"unknown database", bad_database.text(), ErrorKind::config},
      {"closed port", closed_port.text(), ErrorKind::connection},
  };
}

std::string admin_sql(const std::string& sql) {
  const std::string backend = backend_name();
  if (backend == "mysql") return mysql_admin(sql);
  if (backend == "postgres") return postgres_admin(sql);
  return sqlite_admin(sql);
}

std::string holder_session(const std::string& table_prefix, std::int64_t token) {
  // MySQL's row-lock strategies record "<connection id>:<holder tag>": the id is the session.
  const std::string recorded =
      admin_sql("SELECT session_id FROM " + table_prefix + "locks WHERE token = " + std::to_string(token));
  return recorded.substr(0, recorded.find(':'));
}

void kill_session(const std::string& session_id) {
  // The id came from our own table; digits only, or the statement would not be ours to send.
  if (session_id.empty() || session_id.find_first_not_of("0123456789") != std::string::npos)
    throw std::runtime_error("kill_session: not a session id: '" + session_id + "'");
  if (backend_name() == "mysql") {
    admin_sql("KILL CONNECTION " + session_id);
  } else if (backend_name() == "postgres") {
    if (admin_sql("SELECT pg_terminate_backend(" + session_id + ")") != "t")
      throw std::runtime_error("kill_session: no session " + session_id);
  } else {
    throw std::runtime_error("kill_session: SQLite has no sessions");
  }
}

void with_short_idle_timeouts(const std::function<void(const std::string& dsn)>& open_and_acquire) {
  if (backend_name() == "postgres") {
    Uri u = Uri::parse(dsn());
    u.query += std::string(u.query.empty() ? "" : "&") +
               "options=-c%20idle_session_timeout%3D1000%20-c%20idle_in_transaction_session_timeout%3D1000";
    open_and_acquire(u.text());
    return;
  }
  if (backend_name() != "mysql") throw std::runtime_error("with_short_idle_timeouts: servers only");
  std::string saved = admin_sql("SELECT @@GLOBAL.wait_timeout");
  // Another test lowering it at the same time could hand us its 2: never put back less than
  // the server's default.
  if (saved.empty() || std::stol(saved) <= 2) saved = "28800";
  admin_sql("SET GLOBAL wait_timeout = 2");
  struct Restore {
    std::string value;
    ~Restore() {
      try {
        admin_sql("SET GLOBAL wait_timeout = " + value);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "could not restore wait_timeout=%s: %s\n", value.c_str(), e.what());
      }
    }
  } restore{saved};
  open_and_acquire(dsn());
}

}  // namespace dblock::test

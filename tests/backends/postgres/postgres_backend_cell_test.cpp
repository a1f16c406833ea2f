// PostgreSQL only: wake-ups per key through LISTEN/NOTIFY, notifications never piling up in
// libpq, and errors decided by SQLSTATE even when the server speaks another language.
#include <libpq-fe.h>
#include <poll.h>

#include <functional>

#include "backends/postgres/postgres_tables.hpp"
#include "backends/registry.hpp"
#include "core/exit_code.hpp"
#include "conformance/conformance_helpers.hpp"

using namespace dblock;
using namespace dblock::conformance;

namespace {

// The test's own session, for what dblock never does itself (NOTIFY storms, server settings).
struct RawSession {
  explicit RawSession(const std::string& dsn) : c(PQconnectdb(dsn.c_str())) {
    REQUIRE_MESSAGE(PQstatus(c) == CONNECTION_OK, PQerrorMessage(c));
  }
  ~RawSession() { PQfinish(c); }
  RawSession(const RawSession&) = delete;
  RawSession& operator=(const RawSession&) = delete;
  void run(const std::string& sql) {
    PGresult* r = PQexec(c, sql.c_str());
    const auto st = PQresultStatus(r);
    INFO(sql << ": " << PQresultErrorMessage(r));
    CHECK((st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK));
    PQclear(r);
  }
  // n notifications on channel, sent in one statement.
  void notify(const std::string& channel, int n) {
    run("SELECT pg_notify('" + channel + "', g::text) FROM generate_series(1, " + std::to_string(n) + ") g");
  }
  PGconn* c;
};

bool readable(int fd, Millis within) {
  REQUIRE(fd >= 0);
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(within.count())) > 0;
}

// The test server speaks `language` (lc_messages, server-wide: a refused login is reported
// before any per-role setting applies) until this goes out of scope.
struct ServerLanguage {
  explicit ServerLanguage(const std::string& language) : raw(test::admin_dsn()) {
    PGresult* r = PQexec(raw.c, ("ALTER SYSTEM SET lc_messages = '" + language + "'").c_str());
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    const std::string why = PQresultErrorMessage(r);
    PQclear(r);
    REQUIRE_MESSAGE(ok, "the OS locale " << language << " is needed (scripts/install-deps.sh): " << why);
    raw.run("SELECT pg_reload_conf()");
    // New sessions (and the postmaster, which answers logins) have reloaded once one shows it.
    for (int i = 0; i < 500; ++i) {
      RawSession fresh(test::admin_dsn());
      PGresult* shown = PQexec(fresh.c, "SHOW lc_messages");
      const std::string now = PQgetvalue(shown, 0, 0);
      PQclear(shown);
      if (now == language) return;
      std::this_thread::sleep_for(10ms);
    }
    FAIL("the server did not take lc_messages = " << language);
  }
  ~ServerLanguage() {
    raw.run("ALTER SYSTEM RESET lc_messages");
    raw.run("SELECT pg_reload_conf()");
  }
  RawSession raw;
};

// The plain test DSN with another password (empty: the same) or database, through libpq's own
// parser (its TLS parameters would not survive this rebuild; the logins here need none).
std::string dsn_with(const std::string& password, const std::string& dbname) {
  char* err = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(test::admin_dsn().c_str(), &err);
  REQUIRE(parsed);
  std::string out = "postgresql://";
  auto value = [&](std::string_view key) {
    for (auto* o = parsed; o->keyword; ++o)
      if (key == o->keyword && o->val) return std::string(o->val);
    return std::string();
  };
  out += value("user") + ":" + (password.empty() ? value("password") : password) + "@" + value("host") + ":" + value("port") + "/" + dbname;
  PQconninfoFree(parsed);
  return out;
}

Error open_error(const std::string& dsn_text) {
  auto dsn = parse_dsn(dsn_text);
  REQUIRE(dsn);
  BackendOptions options;
  auto conn = postgres::Connection::open(*dsn, options);
  REQUIRE_FALSE(conn.has_value());
  MESSAGE(conn.error().message);
  return conn.error();
}

std::unique_ptr<Locker> lease_locker(Backend& backend) {
  auto made = backend.make_locker(Strategy::lease);
  REQUIRE_MESSAGE(made.has_value(), (made ? std::string() : made.error().message));
  return std::move(*made);
}

}  // namespace

TEST_SUITE("postgres.lease") {
  TEST_CASE("postgres: a release wakes only the waiters of its own key") {
    Db db;
    const std::string a = test::unique_key("wake-a"), b = test::unique_key("wake-b");
    auto holder_a = lease_locker(*db.backend), holder_b = lease_locker(*db.backend);
    acquire(*holder_a, request(a, "owner-a"));
    acquire(*holder_b, request(b, "owner-b"));

    // The waiter has its own connection (a backend on the same tables): a session hears its
    // own NOTIFYs within the statement that sent them, which would hide the socket's readiness.
    auto waiter_backend = test::open(db.options);
    auto waiter = lease_locker(*waiter_backend);
    CHECK(waiting_attempt(*waiter, request(a, "waiter")).state == AcquireOutcome::State::busy);
    const int fd = waiter->wakeup_fd();

    release(*holder_b);
    CHECK_FALSE(readable(fd, 500ms));
    release(*holder_a);
    CHECK(readable(fd, 5000ms));
    waiter->consume_wakeup();
    CHECK_FALSE(readable(fd, 0ms));
    acquire(*waiter, request(a, "waiter"));
    release(*waiter);
  }

  TEST_CASE("postgres: a lease holder stops listening once its command runs, so notifications do not pile up") {
    Db db;
    const std::string key = test::unique_key("quiet");
    auto holder = lease_locker(*db.backend);
    acquire(*holder, request(key, "owner-a"));
    auto waiter_backend = test::open(db.options);
    auto waiter = lease_locker(*waiter_backend);
    CHECK(waiting_attempt(*waiter, request(key, "waiter")).state == AcquireOutcome::State::busy);
    release(*holder);
    acquire(*waiter, request(key, "waiter"));  // was listening on the key's channel
    waiter->prepare_release();  // its command runs (the heartbeat's first call, locker.hpp)
    // What prepare_release sent ahead (the release's Parse) is answered on the same socket: read
    // by the next statement, as a renewal.
    REQUIRE(waiter->renew(30s).has_value());

    RawSession raw(test::dsn());
    raw.notify(release_channel(db.options.table_prefix, key), 2000);
    CHECK_FALSE(readable(waiter->wakeup_fd(), 300ms));
    REQUIRE(waiter->renew(30s).has_value());
    release(*waiter);
  }
}

TEST_SUITE("postgres.lease") {
  // What core asks of an error is its kind, which postgres_error.cpp sets from the SQLSTATE: a
  // lock wait that ran out took nothing (the numbered advisory take gives nothing back after
  // it), and it counts as held elsewhere.
  TEST_CASE("postgres: a lock wait that ran out (55P03) is ErrorKind::wait_ended, held elsewhere") {
    Db db;
    const auto bits = static_cast<std::int64_t>(std::hash<std::string>{}(test::unique_key("w")) & 0xffff);
    const std::string lock = std::to_string(0x5eed0000 + bits);  // a key of this run's own
    RawSession holder(test::dsn());
    holder.run("SELECT pg_advisory_lock(" + lock + ")");
    auto dsn = parse_dsn(test::dsn());
    REQUIRE(dsn);
    auto conn = postgres::Connection::open(*dsn, db.options);
    REQUIRE(conn.has_value());
    auto waited = (*conn)->exec("SET lock_timeout = '50ms'; SELECT pg_advisory_lock(" + lock + ")");
    REQUIRE_FALSE(waited.has_value());
    CHECK(waited.error().sqlstate == "55P03");
    CHECK(waited.error().kind == ErrorKind::wait_ended);
    CHECK(held_elsewhere(waited.error().kind));
    CHECK(exit_code_for(waited.error().kind) == exit_conflict);
    holder.run("SELECT pg_advisory_unlock(" + lock + ")");
  }

  // Runs once per server (the lease cell): it switches the whole test server's language.
  TEST_CASE("postgres: a server answering in German: errors still classified by SQLSTATE") {
    ServerLanguage german("de_DE.UTF-8");
    Db db;

    Error wrong_pw = open_error(dsn_with("not-the-password", "dblock_test"));
    CHECK(wrong_pw.kind == ErrorKind::config);
    CHECK(wrong_pw.sqlstate == "28P01");
    CHECK(wrong_pw.message.find("not-the-password") == std::string::npos);
    CHECK(wrong_pw.message.find("password authentication failed") == std::string::npos);  // really German

    Error no_db = open_error(dsn_with("", "no_such_db_xyz"));
    CHECK(no_db.kind == ErrorKind::config);
    CHECK(no_db.sqlstate == "3D000");

    auto dsn = parse_dsn(test::dsn());
    REQUIRE(dsn);
    auto conn = postgres::Connection::open(*dsn, db.options);
    REQUIRE(conn.has_value());
    auto missing = (*conn)->exec("SELECT * FROM no_such_table_xyz");
    REQUIRE_FALSE(missing.has_value());
    MESSAGE(missing.error().message);
    CHECK(missing.error().kind == ErrorKind::schema_missing);
    CHECK(missing.error().sqlstate == "42P01");
    CHECK(missing.error().message.find("does not exist") == std::string::npos);

    // busy (55P03 from NOWAIT and from lock_timeout) and lost keep their meaning.
    const std::string key = test::unique_key("german");
    auto made = [&] {
      auto l = db.backend->make_locker(Strategy::for_update);
      REQUIRE(l.has_value());
      return std::move(*l);
    };
    auto holder = made(), other = made();
    acquire(*holder, request(key, "owner-a"));
    CHECK(attempt(*other, request(key, "owner-b")).state == AcquireOutcome::State::busy);
    auto waited = other->try_acquire(request(key, "owner-b"), 200ms);
    REQUIRE_MESSAGE(waited.has_value(), (waited ? std::string() : waited.error().message));
    CHECK(waited->state == AcquireOutcome::State::busy);
    REQUIRE(db.backend->release(key, forced()).has_value());
    auto renewed = holder->renew(30s);
    REQUIRE_FALSE(renewed.has_value());
    CHECK(renewed.error().kind == ErrorKind::lost);
  }
}

TEST_SUITE("postgres") {
  TEST_CASE("postgres: a statement a session runs again is parsed once; one a pooler lost runs again unnamed") {
    auto dsn = parse_dsn(test::dsn());
    REQUIRE(dsn);
    auto conn = postgres::Connection::open(*dsn, BackendOptions{});
    REQUIRE_MESSAGE(conn.has_value(), (conn ? std::string() : conn.error().message));
    auto& c = **conn;
    // Statements are named only for a session that sees the server directly (sql::served_directly).
    postgres::Session session(std::move(*conn), "");
    auto named = [&c] {
      auto r = c.exec("SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'dblock\\_%'");
      REQUIRE(r.has_value());
      return (*r)[0].int64(0);
    };
    auto plus_one = [&session](std::int64_t n) {
      auto r = session.run({"test.plus_one", "SELECT :n::int + 1"}, {{"n", n}});
      REQUIRE_MESSAGE(r.has_value(), (r ? std::string() : r.error().message));
      return (*r)[0].int64(0);
    };
    CHECK(plus_one(1) == 2);
    CHECK(named() == 0);  // once: not worth a name
    CHECK(plus_one(2) == 3);
    CHECK(named() == 1);  // again (a waiter's next attempt): prepared by name, then run by it
    CHECK(plus_one(3) == 4);
    CHECK(named() == 1);
    // What transaction pooling does to a session: the name is gone. The statement runs again,
    // unnamed, and nothing is named on this connection from then on.
    REQUIRE(c.exec("DEALLOCATE ALL").has_value());
    CHECK(plus_one(4) == 5);
    CHECK(plus_one(5) == 6);
    const sql::Statement twice{"test.twice", "SELECT :n::int * 2"};
    auto other = session.run(twice, {{"n", std::string("4")}});
    REQUIRE(other.has_value());
    other = session.run(twice, {{"n", std::string("4")}});
    REQUIRE(other.has_value());
    CHECK((*other)[0].int64(0) == 8);
    CHECK(named() == 0);
  }

  TEST_CASE("postgres: notifications read by statements after unlisten are dropped, not queued") {
    auto dsn = parse_dsn(test::dsn());
    REQUIRE(dsn);
    BackendOptions options;
    auto conn = postgres::Connection::open(*dsn, options);
    REQUIRE_MESSAGE(conn.has_value(), (conn ? std::string() : conn.error().message));
    auto& c = **conn;
    const std::string channel = release_channel(test::unique_prefix(), "k");
    REQUIRE(c.listen(channel).has_value());

    RawSession raw(test::dsn());
    raw.notify(channel, 500);
    std::this_thread::sleep_for(200ms);
    REQUIRE(c.exec("SELECT 1").has_value());  // reads them into libpq's queue
    REQUIRE(c.unlisten().has_value());
    raw.notify(channel, 500);
    REQUIRE(c.exec("SELECT 1").has_value());
    CHECK_FALSE(c.drain_notifications());

    REQUIRE(c.listen(channel).has_value());
    raw.notify(channel, 3);
    CHECK(readable(c.socket(), 5000ms));
    CHECK(c.drain_notifications());
  }
}

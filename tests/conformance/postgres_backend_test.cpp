// PostgreSQL only: wake-ups per key through LISTEN/NOTIFY, notifications never piling up in
// libpq, and errors decided by SQLSTATE even when the server speaks another language.
#include <libpq-fe.h>
#include <poll.h>

#include "backends/postgres/postgres_tables.hpp"
#include "backends/registry.hpp"
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
    CHECK(attempt(*waiter, request(a, "waiter")).state == AcquireOutcome::State::busy);
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

  TEST_CASE("postgres: a lease holder stops listening, so notifications do not pile up while its command runs") {
    Db db;
    const std::string key = test::unique_key("quiet");
    auto holder = lease_locker(*db.backend);
    acquire(*holder, request(key, "owner-a"));
    auto waiter_backend = test::open(db.options);
    auto waiter = lease_locker(*waiter_backend);
    CHECK(attempt(*waiter, request(key, "waiter")).state == AcquireOutcome::State::busy);
    release(*holder);
    acquire(*waiter, request(key, "waiter"));  // was listening on the key's channel

    RawSession raw(test::dsn());
    raw.notify(postgres::release_channel(db.options.table_prefix, key), 2000);
    CHECK_FALSE(readable(waiter->wakeup_fd(), 300ms));
    REQUIRE(waiter->renew(30s).has_value());
    release(*waiter);
  }
}

TEST_SUITE("postgres") {
  TEST_CASE("postgres: notifications read by statements after unlisten are dropped, not queued") {
    auto dsn = parse_dsn(test::dsn());
    REQUIRE(dsn);
    BackendOptions options;
    auto conn = postgres::Connection::open(*dsn, options);
    REQUIRE_MESSAGE(conn.has_value(), (conn ? std::string() : conn.error().message));
    auto& c = **conn;
    const std::string channel = postgres::release_channel(test::unique_prefix(), "k");
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

// PostgreSQL-specific checks (suites "postgres", "postgres.lease"): nonblocking latency,
// LISTEN/NOTIFY wakeups, a lease's connection terminated under it, libpq DSN errors, statement
// cancel at the I/O timeout. What both servers promise is in the common suites.
#include <doctest/doctest.h>
#include <libpq-fe.h>
#include <poll.h>

#include <chrono>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>

#include "backends/postgres/postgres_connection.hpp"
#include "backends/registry.hpp"
#include "core/clock.hpp"
#include "conformance/conformance_helpers.hpp"
#include "support/test_env.hpp"

namespace dblock {
namespace {

BackendOptions opts(const std::string& prefix) {
  BackendOptions o;
  o.table_prefix = prefix;
  o.connect_timeout = Millis(3000);
  o.io_timeout = Millis(3000);
  return o;
}

std::unique_ptr<Backend> open_with(const std::string& dsn_text, const BackendOptions& o) {
  auto dsn = parse_dsn(dsn_text);
  REQUIRE(dsn);
  auto b = open_backend(*dsn, o);
  REQUIRE_MESSAGE(b, (b ? "" : b.error().message));
  return std::move(*b);
}

using conformance::request;  // the one LockRequest of the conformance tests

// A raw libpq session for the test's own SQL (pg_terminate_backend, table setup).
struct Raw {
  PGconn* c;
  explicit Raw(const std::string& dsn) : c(PQconnectdb(dsn.c_str())) { REQUIRE(PQstatus(c) == CONNECTION_OK); }
  ~Raw() { PQfinish(c); }
  std::string one(const std::string& sql) {
    PGresult* r = PQexec(c, sql.c_str());
    auto st = PQresultStatus(r);
    INFO(PQresultErrorMessage(r));
    CHECK((st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK));
    std::string v = (st == PGRES_TUPLES_OK && PQntuples(r) > 0) ? PQgetvalue(r, 0, 0) : "";
    PQclear(r);
    return v;
  }
};

// A key of exactly 255 bytes mixing 1-, 2-, 3- and 4-byte UTF-8 characters.
std::string long_utf8_key() {
  std::string k = test::unique_key("k");
  const char* pieces[] = {"\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x94\x92", "a"};
  for (int i = 0; k.size() < 251; ++i) k += pieces[i % 4];
  while (k.size() < 255) k += 'z';
  return k;
}

// URI pieces of the test DSN, through libpq's own parser.
std::string conninfo_value(const std::string& dsn, const char* keyword) {
  char* err = nullptr;
  PQconninfoOption* o = PQconninfoParse(dsn.c_str(), &err);
  REQUIRE(o);
  std::string v;
  for (auto* p = o; p->keyword; ++p)
    if (std::string(p->keyword) == keyword && p->val) v = p->val;
  PQconninfoFree(o);
  return v;
}

}  // namespace

TEST_CASE("postgres: nonblocking busy answers are fast, warm and cold" * doctest::test_suite("postgres")) {
  auto prefix = test::unique_prefix();
  auto b = open_with(test::dsn(), opts(prefix));
  REQUIRE(b->ensure_schema());
  const std::string key = long_utf8_key();
  auto a = b->make_locker(test::strategy());
  auto other = open_with(test::dsn(), opts(prefix));
  auto c = other->make_locker(test::strategy());
  REQUIRE(a);
  REQUIRE(c);
  auto got = (*a)->try_acquire(request(key, "A"), Millis(0));
  REQUIRE_MESSAGE(got, (got ? "" : got.error().message));
  REQUIRE(got->state == AcquireOutcome::State::acquired);

  auto t0 = std::chrono::steady_clock::now();
  auto busy = (*c)->try_acquire(request(key, "C"), Millis(0));
  auto latency = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  REQUIRE_MESSAGE(busy, (busy ? "" : busy.error().message));
  CHECK(busy->state == AcquireOutcome::State::busy);
  CHECK(latency < std::chrono::milliseconds(100));
  // Warm figures: the median and worst of 20 nonblocking busy answers.
  std::vector<long> us;
  for (int i = 0; i < 20; ++i) {
    auto t1 = std::chrono::steady_clock::now();
    auto again = (*c)->try_acquire(request(key, "C"), Millis(0));
    us.push_back(static_cast<long>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t1).count()));
    REQUIRE(again);
    CHECK(again->state == AcquireOutcome::State::busy);
  }
  std::sort(us.begin(), us.end());
  MESSAGE("nonblocking busy answer for ", to_string(test::strategy()), ": first ", latency.count(), " us, median ",
          us[10], " us, max ", us.back(), " us");
  CHECK(us.back() < 100'000);
  CHECK((*a)->release(ReleaseRequest{}));
}

// What an uncontended run costs in the database, without the processes around it: one
// acquire and one release with its history row, median of 31. The figure goes to the log.
TEST_CASE("postgres: an uncontended acquire and release with history, timed" * doctest::test_suite("postgres")) {
  auto prefix = test::unique_prefix();
  auto b = open_with(test::dsn(), opts(prefix));
  REQUIRE(b->ensure_schema());
  auto l = b->make_locker(test::strategy());
  REQUIRE(l);
  const std::string key = test::unique_key("timed");
  std::vector<long> us;
  for (int i = 0; i < 31; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto got = (*l)->try_acquire(request(key, "T"), Millis(0));
    REQUIRE_MESSAGE(got, (got ? "" : got.error().message));
    REQUIRE(got->state == AcquireOutcome::State::acquired);
    ReleaseRequest rel;
    rel.finished_run = true;
    rel.exit_code = 0;
    RunRecord run;
    run.outcome = RunOutcome::ok;
    run.exit_code = 0;
    rel.history = run;
    REQUIRE((*l)->release(rel));
    us.push_back(static_cast<long>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count()));
  }
  std::sort(us.begin(), us.end());
  MESSAGE("acquire + release with history, ", to_string(test::strategy()), ": median ", us[15], " us, min ", us.front(),
          " us, max ", us.back(), " us");
  auto runs = b->history(key, 100);
  REQUIRE_MESSAGE(runs, (runs ? "" : runs.error().message));
  CHECK(runs->size() == 31);
}

// The handoff inside the database, without the processes around it: the holder's release
// starts -> the waiter's try_acquire returns acquired. The waiter is woken by the server (its
// lock queue, or NOTIFY for a lease), never by its own timer: with a 2 s server wait (session)
// or a 2 s poll (lease), a median far below that proves it. The figures go to the log.
TEST_CASE("postgres: a waiter is handed the key by the server at the holder's release" * doctest::test_suite("postgres")) {
  auto prefix = test::unique_prefix();
  auto hb = open_with(test::dsn(), opts(prefix));
  REQUIRE(hb->ensure_schema());
  auto wb = open_with(test::dsn(), opts(prefix));
  auto h = hb->make_locker(test::strategy());
  auto w = wb->make_locker(test::strategy());
  REQUIRE(h);
  REQUIRE(w);
  const std::string key = test::unique_key("handoff");
  const bool lease = test::strategy() == Strategy::lease;
  std::vector<long> us;
  for (int i = 0; i < 15; ++i) {
    auto got = (*h)->try_acquire(request(key, "H"), Millis(0));
    REQUIRE_MESSAGE(got, (got ? "" : got.error().message));
    REQUIRE(got->state == AcquireOutcome::State::acquired);
    std::atomic<bool> waiting{false};
    std::chrono::steady_clock::time_point acquired_at;
    std::string problem;
    std::thread waiter([&] {
      for (int tries = 0; tries < 10; ++tries) {
        auto out = (*w)->try_acquire(request(key, "W"), lease ? Millis(100) : Millis(2000));
        if (!out) {
          problem = out.error().message;
          return;
        }
        if (out->state == AcquireOutcome::State::acquired) {
          acquired_at = std::chrono::steady_clock::now();
          return;
        }
        waiting = true;
        if (lease) {
          pollfd p{(*w)->wakeup_fd(), POLLIN, 0};
          ::poll(&p, 1, 2000);
          (*w)->consume_wakeup();
        }
      }
      problem = "never acquired";
    });
    while (!waiting && lease) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the waiter sits in the server's queue
    const auto released_at = std::chrono::steady_clock::now();
    REQUIRE((*h)->release(ReleaseRequest{}));
    waiter.join();
    REQUIRE_MESSAGE(problem.empty(), problem);
    us.push_back(static_cast<long>(std::chrono::duration_cast<std::chrono::microseconds>(acquired_at - released_at).count()));
    REQUIRE((*w)->release(ReleaseRequest{}));
  }
  std::sort(us.begin(), us.end());
  MESSAGE("handoff in the database (release -> waiter acquired), ", to_string(test::strategy()), ": median ", us[7],
          " us, min ", us.front(), " us, max ", us.back(), " us");
  CHECK(us[7] < 500'000);
}

TEST_CASE("postgres: a lease waiter's wakeup descriptor turns readable at the holder's release" *
          doctest::test_suite("postgres.lease")) {
  auto prefix = test::unique_prefix();
  auto b = open_with(test::dsn(), opts(prefix));
  REQUIRE(b->ensure_schema());
  const std::string key = test::unique_key("wait");
  auto a = b->make_locker(test::strategy());
  auto other = open_with(test::dsn(), opts(prefix));
  auto c = other->make_locker(test::strategy());
  REQUIRE((*a)->try_acquire(request(key, "A"), Millis(0))->state == AcquireOutcome::State::acquired);
  // A waiter's attempt (with a wait) leaves it listening.
  REQUIRE((*c)->try_acquire(request(key, "C"), Millis(100))->state == AcquireOutcome::State::busy);
  int fd = (*c)->wakeup_fd();
  REQUIRE(fd >= 0);
  (*c)->consume_wakeup();
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE((*a)->release(ReleaseRequest{}));
  pollfd p{fd, POLLIN, 0};
  int n = ::poll(&p, 1, 1000);  // LISTEN/NOTIFY answers in milliseconds; 1 s for a loaded machine
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  CHECK(n == 1);
  MESSAGE("wakeup fd readable ", waited.count(), " ms after release");
  (*c)->consume_wakeup();
  auto got = (*c)->try_acquire(request(key, "C"), Millis(0));
  REQUIRE(got);
  CHECK(got->state == AcquireOutcome::State::acquired);
}

// What both servers share (wrong password, unknown database, closed port) is the common case
// "a DSN that cannot work ..."; these are libpq's own DSN parameters.
TEST_CASE("postgres: libpq rejects unknown parameters and bad escapes as config; an unknown database is named" *
          doctest::test_suite("postgres.lease")) {
  const std::string dsn = test::dsn();
  const std::string user = conninfo_value(dsn, "user"), host = conninfo_value(dsn, "host"),
                    db = conninfo_value(dsn, "dbname"), port = conninfo_value(dsn, "port");
  const std::string secret(test::wrong_password);
  auto attempt = [&](const std::string& text) {
    auto parsed = parse_dsn(text);
    REQUIRE(parsed);
    auto b = open_backend(*parsed, opts("dblock_"));
    REQUIRE_FALSE(b);
    MESSAGE(b.error().message);
    CHECK(b.error().message.find(secret) == std::string::npos);
    return b.error();
  };
  // A DSN libpq cannot parse is refused when it is read, before anything connects.
  for (const std::string& bad : {"postgres://" + user + ":" + secret + "@" + host + "/" + db + "?bogus_param=1",
                                 "postgres://" + user + ":%zz" + secret + "@" + host + "/" + db}) {
    auto parsed = parse_dsn(bad);
    REQUIRE_FALSE(parsed);
    CHECK(parsed.error().kind == ErrorKind::config);
    CHECK(parsed.error().message.find(secret) == std::string::npos);
  }
  const std::string real_pw = test::password();
  const Error no_db = attempt("postgres://" + user + (real_pw.empty() ? "" : ":" + real_pw) + "@" + host + ":" + port +
                              "/no_such_db_xyz");
  CHECK(no_db.kind == ErrorKind::config);
  CHECK(no_db.message.find("no_such_db_xyz") != std::string::npos);
  if (!real_pw.empty()) CHECK(no_db.message.find(real_pw) == std::string::npos);
}

// (A session holder's terminated backend: the common "session" case.)
TEST_CASE("postgres: a lease survives a dropped connection: renew reconnects once" * doctest::test_suite("postgres.lease")) {
  auto prefix = test::unique_prefix();
  auto b = open_with(test::dsn(), opts(prefix));
  REQUIRE(b->ensure_schema());
  const std::string key = test::unique_key("drop");
  auto a = b->make_locker(test::strategy());
  auto got = (*a)->try_acquire(request(key, "A"), Millis(0));
  REQUIRE(got);
  REQUIRE(got->state == AcquireOutcome::State::acquired);
  Raw raw(test::dsn());
  // Kill only this test's session: the lease's connection last ran a statement on our unique table.
  std::string killed = raw.one(
      "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND "
      "application_name = 'dblock' AND query LIKE '%" + prefix + "locks%'");
  CHECK(killed == "1");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto renewed = (*a)->renew(Millis(30000));
  CHECK_MESSAGE(renewed, (renewed ? "" : renewed.error().message));
  std::vector<std::string> keys{key};
  auto st = b->status(keys);
  REQUIRE(st);
  CHECK((*st)[0].state == LockStatus::State::held);
  CHECK((*a)->release(ReleaseRequest{}));
}

// Strategy-independent: runs once, in the lease cell.
TEST_CASE("postgres: a statement past the I/O timeout is cancelled and reported as connection" *
          doctest::test_suite("postgres.lease")) {
  auto dsn = parse_dsn(test::dsn());
  REQUIRE(dsn);
  BackendOptions o = opts("dblock_");
  o.io_timeout = Millis(300);
  auto conn = postgres::Connection::open(*dsn, o);
  REQUIRE(conn);
  const int pid = (*conn)->backend_pid();
  auto t0 = std::chrono::steady_clock::now();
  auto r = (*conn)->exec("SELECT pg_sleep(5)");
  auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(r);
  CHECK(r.error().kind == ErrorKind::connection);
  CHECK(took < std::chrono::milliseconds(1500));
  CHECK_FALSE((*conn)->is_open());
  Raw raw(test::dsn());
  std::string still;
  for (int i = 0; i < 30; ++i) {  // the cancel and the closed socket end the server's query
    still = raw.one("SELECT count(*) FROM pg_stat_activity WHERE pid = " + std::to_string(pid) + " AND state = 'active'");
    if (still == "0") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(still == "0");
}

}  // namespace dblock

// PostgreSQL-specific checks (run by ctest's conformance.postgres.* cells; skipped elsewhere):
// long UTF-8 keys, killed holders, server idle killers, LISTEN/NOTIFY wakeups, connection
// errors without passwords, concurrent schema creation, nonblocking latency.
#include <doctest/doctest.h>
#include <libpq-fe.h>
#include <poll.h>

#include <chrono>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>

#include "backends/postgres/postgres_connection.hpp"
#include "backends/registry.hpp"
#include "core/clock.hpp"
#include "support/test_env.hpp"

namespace dblock {
namespace {

bool is_pg() { return test::backend_name() == "postgres"; }

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

LockRequest request(const std::string& key, const std::string& owner) {
  LockRequest r;
  r.key = key;
  r.owner = owner;
  r.host = "testhost";
  r.pid = 4242;
  r.ttl = Millis(30000);
  return r;
}

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

std::string with_param(const std::string& dsn, const std::string& kv) {
  return dsn + (dsn.find('?') == std::string::npos ? "?" : "&") + kv;
}

}  // namespace

TEST_CASE("postgres: 255-byte UTF-8 key: busy, release, token grows, status") {
  if (!is_pg()) return;
  auto prefix = test::unique_prefix();
  auto b = open_with(test::dsn(), opts(prefix));
  REQUIRE(b->ensure_schema());
  const std::string key = long_utf8_key();
  REQUIRE(key.size() == 255);
  auto a = b->make_locker(test::strategy());
  auto other = open_with(test::dsn(), opts(prefix));
  auto c = other->make_locker(test::strategy());
  REQUIRE(a);
  REQUIRE(c);
  auto got = (*a)->try_acquire(request(key, "A"), Millis(0));
  REQUIRE_MESSAGE(got, (got ? "" : got.error().message));
  REQUIRE(got->state == AcquireOutcome::State::acquired);
  const auto first = got->token;
  CHECK(first >= 1);

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

  std::vector<std::string> keys{key};
  auto st = b->status(keys);
  REQUIRE(st);
  REQUIRE(st->size() == 1);
  CHECK((*st)[0].state == LockStatus::State::held);
  CHECK((*st)[0].owner == "A");
  CHECK((*st)[0].key == key);
  CHECK((*a)->renew(Millis(30000)));

  ReleaseRequest rel;
  rel.finished_run = true;
  rel.exit_code = 3;
  REQUIRE((*a)->release(rel));
  st = b->status(keys);
  REQUIRE(st);
  CHECK((*st)[0].state == LockStatus::State::free);
  CHECK((*st)[0].last_exit_code == 3);

  auto second = (*c)->try_acquire(request(key, "C"), Millis(0));
  REQUIRE(second);
  REQUIRE(second->state == AcquireOutcome::State::acquired);
  CHECK(second->token > first);
  CHECK((*c)->release(ReleaseRequest{}));
}

TEST_CASE("postgres: a waiting acquire returns soon after release (server-side wait or wakeup)") {
  if (!is_pg()) return;
  auto prefix = test::unique_prefix();
  auto b = open_with(test::dsn(), opts(prefix));
  REQUIRE(b->ensure_schema());
  const std::string key = test::unique_key("wait");
  auto a = b->make_locker(test::strategy());
  auto other = open_with(test::dsn(), opts(prefix));
  auto c = other->make_locker(test::strategy());
  REQUIRE((*a)->try_acquire(request(key, "A"), Millis(0))->state == AcquireOutcome::State::acquired);
  if (test::strategy() == Strategy::lease) {
    REQUIRE((*c)->try_acquire(request(key, "C"), Millis(0))->state == AcquireOutcome::State::busy);
    int fd = (*c)->wakeup_fd();
    REQUIRE(fd >= 0);
    (*c)->consume_wakeup();
    auto t0 = std::chrono::steady_clock::now();
    REQUIRE((*a)->release(ReleaseRequest{}));
    pollfd p{fd, POLLIN, 0};
    int n = ::poll(&p, 1, 100);
    auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    CHECK(n == 1);
    MESSAGE("wakeup fd readable ", waited.count(), " ms after release");
    (*c)->consume_wakeup();
    auto got = (*c)->try_acquire(request(key, "C"), Millis(0));
    REQUIRE(got);
    CHECK(got->state == AcquireOutcome::State::acquired);
  } else {
    // The server wakes a waiter in a lock_timeout slice as soon as the holder lets go.
    std::thread releaser([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      CHECK((*a)->release(ReleaseRequest{}));
    });
    auto t0 = std::chrono::steady_clock::now();
    auto got = (*c)->try_acquire(request(key, "C"), Millis(3000));
    auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    releaser.join();
    REQUIRE_MESSAGE(got, (got ? "" : got.error().message));
    CHECK(got->state == AcquireOutcome::State::acquired);
    CHECK(waited < std::chrono::milliseconds(2000));
    MESSAGE("server-side wait answered after ", waited.count(), " ms (release at ~300 ms)");
    // and a timed-out wait slice is busy, not an error
    auto third_b = open_with(test::dsn(), opts(prefix));
    auto third = third_b->make_locker(test::strategy());
    auto t1 = std::chrono::steady_clock::now();
    auto busy = (*third)->try_acquire(request(key, "T"), Millis(200));
    REQUIRE(busy);
    CHECK(busy->state == AcquireOutcome::State::busy);
    CHECK(std::chrono::steady_clock::now() - t1 >= std::chrono::milliseconds(150));
  }
}

TEST_CASE("postgres: six contenders: mutual exclusion and strictly increasing tokens") {
  if (!is_pg()) return;
  auto prefix = test::unique_prefix();
  REQUIRE(open_with(test::dsn(), opts(prefix))->ensure_schema());
  const std::string key = test::unique_key("race");
  std::mutex m;
  std::vector<std::int64_t> tokens;
  std::atomic<int> inside{0}, overlaps{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      auto dsn = parse_dsn(test::dsn());
      auto b = open_backend(*dsn, opts(prefix));
      if (!b) { ++errors; return; }
      auto l = (*b)->make_locker(test::strategy());
      if (!l) { ++errors; return; }
      // Each contender keeps trying until it has held the lock twice (bounded by a deadline), so
      // a loaded machine slows the test down instead of starving a thread into a false failure.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      for (int held = 0; held < 2 && std::chrono::steady_clock::now() < deadline;) {
        auto got = (*l)->try_acquire(request(key, "T" + std::to_string(t)), Millis(test::strategy() == Strategy::lease ? 0 : 200));
        if (!got) { ++errors; continue; }
        if (got->state != AcquireOutcome::State::acquired) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
          continue;
        }
        ++held;
        if (inside.fetch_add(1) != 0) ++overlaps;
        {
          std::lock_guard g(m);
          tokens.push_back(got->token);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        inside.fetch_sub(1);
        if (!(*l)->release(ReleaseRequest{})) ++errors;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(errors == 0);
  CHECK(overlaps == 0);
  CHECK(tokens.size() == 12);
  for (std::size_t i = 1; i < tokens.size(); ++i) CHECK(tokens[i] > tokens[i - 1]);
}

TEST_CASE("postgres: holder killed mid-session: renew is lost, status free, token still grows") {
  if (!is_pg() || test::strategy() == Strategy::lease) return;
  auto prefix = test::unique_prefix();
  auto b = open_with(test::dsn(), opts(prefix));
  REQUIRE(b->ensure_schema());
  const std::string key = long_utf8_key();
  auto a = b->make_locker(test::strategy());
  auto got = (*a)->try_acquire(request(key, "A"), Millis(0));
  REQUIRE(got);
  REQUIRE(got->state == AcquireOutcome::State::acquired);
  Raw raw(test::dsn());
  std::string n = raw.one("SELECT count(pg_terminate_backend(session_id::int)) FROM \"" + prefix +
                          "locks\" WHERE token = " + std::to_string(got->token) + " AND session_id IS NOT NULL");
  CHECK(n == "1");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto renewed = (*a)->renew(Millis(30000));
  REQUIRE_FALSE(renewed);
  CHECK(renewed.error().kind == ErrorKind::lost);
  std::vector<std::string> keys{key};
  auto st = b->status(keys);
  REQUIRE(st);
  CHECK((*st)[0].state == LockStatus::State::free);
  auto other = open_with(test::dsn(), opts(prefix));
  auto c = other->make_locker(test::strategy());
  auto again = (*c)->try_acquire(request(key, "C"), Millis(0));
  REQUIRE(again);
  REQUIRE(again->state == AcquireOutcome::State::acquired);
  CHECK(again->token > got->token);
  CHECK((*c)->release(ReleaseRequest{}));
}

TEST_CASE("postgres: idle timeouts of 1 s on the server do not drop a held lock") {
  if (!is_pg() || test::strategy() == Strategy::lease) return;
  auto prefix = test::unique_prefix();
  std::string dsn = with_param(test::dsn(), "options=-c%20idle_session_timeout%3D1000%20-c%20idle_in_transaction_session_timeout%3D1000");
  auto b = open_with(dsn, opts(prefix));
  REQUIRE(b->ensure_schema());
  const std::string key = test::unique_key("idle");
  auto a = b->make_locker(test::strategy());
  REQUIRE(a);
  REQUIRE((*a)->try_acquire(request(key, "A"), Millis(0))->state == AcquireOutcome::State::acquired);
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  auto renewed = (*a)->renew(Millis(30000));
  CHECK_MESSAGE(renewed, (renewed ? "" : renewed.error().message));
  std::vector<std::string> keys{key};
  auto st = b->status(keys);
  REQUIRE(st);
  CHECK((*st)[0].state == LockStatus::State::held);
  CHECK((*a)->release(ReleaseRequest{}));
}

TEST_CASE("postgres: min-interval answers not_due") {
  if (!is_pg()) return;
  auto prefix = test::unique_prefix();
  auto b = open_with(test::dsn(), opts(prefix));
  REQUIRE(b->ensure_schema());
  const std::string key = test::unique_key("due");
  auto a = b->make_locker(test::strategy());
  auto req = request(key, "A");
  req.min_interval = Millis(60000);
  REQUIRE((*a)->try_acquire(req, Millis(0))->state == AcquireOutcome::State::acquired);
  REQUIRE((*a)->release(ReleaseRequest{}));
  auto again = (*a)->try_acquire(req, Millis(0));
  REQUIRE(again);
  CHECK(again->state == AcquireOutcome::State::not_due);
  REQUIRE(again->due_in);
  CHECK(*again->due_in > Millis(50000));
  CHECK(*again->due_in <= Millis(60000));
}

TEST_CASE("postgres: history rows are written and pruned") {
  if (!is_pg()) return;
  auto prefix = test::unique_prefix();
  auto o = opts(prefix);
  o.history_keep = 2;
  auto b = open_with(test::dsn(), o);
  REQUIRE(b->ensure_schema());
  const std::string key = test::unique_key("hist");
  auto a = b->make_locker(test::strategy());
  for (int i = 0; i < 3; ++i) {
    auto got = (*a)->try_acquire(request(key, "A"), Millis(0));
    REQUIRE(got);
    REQUIRE(got->state == AcquireOutcome::State::acquired);
    ReleaseRequest rel;
    rel.finished_run = true;
    rel.exit_code = i;
    RunRecord run;
    run.key = key;
    run.token = got->token;
    run.owner = "A";
    run.host = "testhost";
    run.pid = 1;
    run.strategy = std::string(to_string(test::strategy()));
    run.outcome = i == 0 ? RunOutcome::ok : RunOutcome::failed;
    run.exit_code = i;
    rel.history = run;
    REQUIRE((*a)->release(rel));
  }
  auto h = b->history(key, 10);
  REQUIRE(h);
  REQUIRE(h->size() == 2);
  CHECK((*h)[0].exit_code == 2);
  CHECK((*h)[1].exit_code == 1);
  CHECK((*h)[0].started_at_ms > 0);
}

TEST_CASE("postgres: connection errors have the right kind and no password") {
  if (!is_pg() || test::strategy() != Strategy::lease) return;
  const std::string dsn = test::dsn();
  const std::string user = conninfo_value(dsn, "user"), host = conninfo_value(dsn, "host"),
                    port = conninfo_value(dsn, "port"), db = conninfo_value(dsn, "dbname");
  const std::string secret = "S3cretXyz";
  auto attempt = [&](const std::string& text) {
    auto parsed = parse_dsn(text);
    REQUIRE(parsed);
    auto b = open_backend(*parsed, opts("dblock_"));
    REQUIRE_FALSE(b);
    MESSAGE(b.error().message);
    CHECK(b.error().message.find(secret) == std::string::npos);
    return b.error().kind;
  };
  std::string base = "postgres://" + user + ":" + secret + "@" + host;
  auto wrong_pw = attempt(base + ":" + port + "/" + db);
  CHECK((wrong_pw == ErrorKind::config || wrong_pw == ErrorKind::connection));
  CHECK(attempt(base + ":1/" + db) == ErrorKind::connection);
  const std::string real_pw = conninfo_value(dsn, "password");
  const std::string real = "postgres://" + user + (real_pw.empty() ? "" : ":" + real_pw) + "@" + host + ":" + port;
  auto no_db = parse_dsn(real + "/no_such_db_xyz");
  REQUIRE(no_db);
  auto nb = open_backend(*no_db, opts("dblock_"));
  REQUIRE_FALSE(nb);
  MESSAGE(nb.error().message);
  CHECK(nb.error().kind == ErrorKind::config);
  CHECK(nb.error().message.find("does not exist") != std::string::npos);
  if (!real_pw.empty()) CHECK(nb.error().message.find(real_pw) == std::string::npos);
  // A DSN libpq cannot parse is refused when it is read, before anything connects.
  for (const std::string& bad : {"postgres://" + user + ":" + secret + "@" + host + "/" + db + "?bogus_param=1",
                                 "postgres://" + user + ":%zz" + secret + "@" + host + "/" + db}) {
    auto parsed = parse_dsn(bad);
    REQUIRE_FALSE(parsed);
    CHECK(parsed.error().kind == ErrorKind::config);
    CHECK(parsed.error().message.find(secret) == std::string::npos);
  }
}

TEST_CASE("postgres: eight concurrent first uses create the schema without failing; wrong shape is config") {
  if (!is_pg() || test::strategy() != Strategy::lease) return;
  auto prefix = test::unique_prefix();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      auto dsn = parse_dsn(test::dsn());
      auto b = open_backend(*dsn, opts(prefix));
      if (b && (*b)->ensure_schema()) ++ok;
    });
  for (auto& t : threads) t.join();
  CHECK(ok == 8);

  auto bad_prefix = test::unique_prefix();
  Raw raw(test::dsn());
  raw.one("CREATE TABLE \"" + bad_prefix + "locks\" (name text PRIMARY KEY, owner text)");
  auto b = open_with(test::dsn(), opts(bad_prefix));
  auto r = b->ensure_schema();
  REQUIRE_FALSE(r);
  CHECK(r.error().kind == ErrorKind::config);
  CHECK(r.error().message.find("host") != std::string::npos);
  raw.one("DROP TABLE \"" + bad_prefix + "locks\"");
}

TEST_CASE("postgres: doctor reports one line per check") {
  if (!is_pg()) return;
  auto b = open_with(test::dsn(), opts(test::unique_prefix()));
  REQUIRE(b->ensure_schema());
  auto checks = b->doctor_checks(test::strategy());
  REQUIRE(checks.size() >= 4);
  for (const auto& c : checks) {
    INFO(c.name, ": ", c.detail);
    CHECK(c.ok);
    CHECK(c.detail.find('\n') == std::string::npos);
  }
  auto now = b->now_ms();
  REQUIRE(now);
  CHECK(std::llabs(*now - wall_now_ms()) < 60'000);
}

}  // namespace dblock

namespace dblock {

TEST_CASE("postgres: lease survives a dropped connection (renew reconnects once); session renew does not") {
  if (!is_pg()) return;
  auto prefix = test::unique_prefix();
  auto b = open_with(test::dsn(), opts(prefix));
  REQUIRE(b->ensure_schema());
  const std::string key = test::unique_key("drop");
  auto a = b->make_locker(test::strategy());
  auto got = (*a)->try_acquire(request(key, "A"), Millis(0));
  REQUIRE(got);
  REQUIRE(got->state == AcquireOutcome::State::acquired);
  Raw raw(test::dsn());
  // Kill only this test's session: the lease's connection last ran a statement on our unique
  // table; a session strategy's holder is the stored session_id.
  std::string killed = raw.one(
      "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND " +
      std::string(test::strategy() == Strategy::lease
                       ? "application_name = 'dblock' AND query LIKE '%" + prefix + "locks%'"
                       : "pid::text = (SELECT session_id FROM \"" + prefix + "locks\" WHERE token = " +
                             std::to_string(got->token) + ")"));
  CHECK(killed == "1");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto renewed = (*a)->renew(Millis(30000));
  if (test::strategy() == Strategy::lease) {
    CHECK_MESSAGE(renewed, (renewed ? "" : renewed.error().message));
    CHECK((*a)->release(ReleaseRequest{}));
  } else {
    REQUIRE_FALSE(renewed);
    CHECK(renewed.error().kind == ErrorKind::lost);
  }
}

TEST_CASE("postgres: stateless renew and release check the holder") {
  if (!is_pg() || test::strategy() != Strategy::lease) return;
  auto prefix = test::unique_prefix();
  auto b = open_with(test::dsn(), opts(prefix));
  REQUIRE(b->ensure_schema());
  const std::string key = test::unique_key("cli");
  auto a = b->make_locker(Strategy::lease);
  auto got = (*a)->try_acquire(request(key, "A"), Millis(0));
  REQUIRE(got);
  HolderSelector owner_a{std::string("A"), std::nullopt, false};
  HolderSelector owner_b{std::string("B"), std::nullopt, false};
  HolderSelector bad_token{std::nullopt, got->token + 7, false};
  auto until = b->renew(key, owner_a, Millis(60000));
  REQUIRE(until);
  CHECK(*until > *got->expires_at_ms);
  CHECK(b->renew(key, owner_b, Millis(60000)).error().kind == ErrorKind::lost);
  CHECK(b->release(key, bad_token).error().kind == ErrorKind::lost);
  CHECK(b->release(key, HolderSelector{std::nullopt, got->token, false}));
  std::vector<std::string> keys{key, test::unique_key("never")};
  auto st = b->status(keys);
  REQUIRE(st);
  REQUIRE(st->size() == 2);
  CHECK((*st)[0].state == LockStatus::State::free);
  CHECK((*st)[1].state == LockStatus::State::free);
  CHECK((*st)[1].token == 0);
  CHECK(b->release(key, HolderSelector{std::nullopt, std::nullopt, true}));
}

TEST_CASE("postgres: a statement past the I/O timeout is cancelled and reported as connection") {
  if (!is_pg() || test::strategy() != Strategy::lease) return;
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

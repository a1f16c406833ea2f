// Mutual exclusion, fencing tokens and owner-checked release: what every strategy promises.

#include <atomic>
#include <chrono>
#include <mutex>

#include "backends/registry.hpp"
#include "conformance/conformance_helpers.hpp"

using namespace dblock;
using namespace dblock::conformance;

namespace {

ReleaseRequest finished(const std::string& key, std::int64_t token, const std::string& owner, int exit_code) {
  ReleaseRequest rel;
  rel.finished_run = true;
  rel.exit_code = exit_code;
  RunRecord run;
  run.key = key;
  run.token = token;
  run.owner = owner;
  run.host = "host-" + owner;
  run.pid = 4242;
  run.strategy = std::string(to_string(test::strategy()));
  run.outcome = exit_code == 0 ? RunOutcome::ok : RunOutcome::failed;
  run.exit_code = exit_code;
  rel.history = run;
  return rel;
}

}  // namespace

TEST_SUITE("all") {

TEST_CASE("creating the schema is idempotent") {
  Db db;
  CHECK(db.backend->ensure_schema().has_value());
  CHECK(db.backend->ensure_schema().has_value());
  // A second connection on the same tables sees them as they are and accepts them.
  auto other = test::open(db.options);
  auto again = other->ensure_schema();
  CHECK_MESSAGE(again.has_value(), (again ? std::string() : again.error().message));

  const std::string key = test::unique_key("idempotent");
  auto locker = db.locker();
  acquire(*locker, request(key, "a"));
  release(*locker);
}

TEST_CASE("eight concurrent first uses create the schema without failing") {
  BackendOptions options;
  options.table_prefix = test::unique_prefix();
  std::atomic<int> ok{0};
  std::mutex m;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      try {
        auto done = test::open(options)->ensure_schema();
        if (done) ++ok;
        std::lock_guard g(m);
        if (!done) errors.push_back(done.error().message);
      } catch (const std::exception& e) {
        std::lock_guard g(m);
        errors.push_back(e.what());
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors) MESSAGE(e);
  CHECK(ok == 8);
}

TEST_CASE("a locks table of the wrong shape is a config error naming the missing column") {
  BackendOptions options;
  options.table_prefix = test::unique_prefix();
  test::admin_sql("CREATE TABLE " + options.table_prefix + "locks (name VARCHAR(255) PRIMARY KEY, owner VARCHAR(255))");
  auto r = test::open(options)->ensure_schema();
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().kind == ErrorKind::config);
  CHECK(r.error().message.find("host") != std::string::npos);
  test::admin_sql("DROP TABLE " + options.table_prefix + "locks");
}

TEST_CASE("a DSN that cannot work fails fast with its kind and never shows a password") {
  const std::string real_password = test::password();
  for (const test::BrokenDsn& broken : test::broken_dsns()) {
    CAPTURE(broken.what);
    auto parsed = parse_dsn(broken.dsn);
    REQUIRE(parsed.has_value());
    BackendOptions options;
    options.table_prefix = test::unique_prefix();
    options.connect_timeout = 2s;
    const auto sent = std::chrono::steady_clock::now();
    // A backend may open lazily: the error then comes with the first use.
    Result<void> outcome = [&]() -> Result<void> {
      auto backend = open_backend(*parsed, options);
      if (!backend) return std::unexpected(backend.error());
      return (*backend)->ensure_schema();
    }();
    REQUIRE_FALSE(outcome.has_value());
    MESSAGE(broken.what, ": ", outcome.error().message);
    CHECK(outcome.error().kind == broken.kind);
    CHECK(std::chrono::steady_clock::now() - sent < 5s);  // connect_timeout 2 s, generously
    CHECK(outcome.error().message.find(test::wrong_password) == std::string::npos);
    if (!real_password.empty()) CHECK(outcome.error().message.find(real_password) == std::string::npos);
  }
}

TEST_CASE("a free key is acquired, a second owner is refused, release frees it, the token grows") {
  Db db;
  const std::string key = test::unique_key("basic");
  auto a = db.locker();
  auto b = db.locker();

  const std::int64_t first = acquire(*a, request(key, "owner-a"));
  const LockStatus held = db.status(key);
  CHECK(held.state == LockStatus::State::held);
  CHECK(held.owner == "owner-a");
  CHECK(held.token == first);
  CHECK(held.last_started_at_ms == held.acquired_at_ms);

  // A nonblocking attempt answers at once (generous: a loaded machine, a remote server).
  const auto sent = std::chrono::steady_clock::now();
  AcquireOutcome refused = attempt(*b, request(key, "owner-b"));
  CHECK(std::chrono::steady_clock::now() - sent < 1s);
  CHECK(refused.state == AcquireOutcome::State::busy);
  REQUIRE(refused.holder.has_value());
  CHECK(refused.holder->owner == "owner-a");
  CHECK(refused.holder->token == first);
  // The refused attempt changed nothing.
  const LockStatus still = db.status(key);
  CHECK(still.state == LockStatus::State::held);
  CHECK(still.owner == "owner-a");
  CHECK(still.token == first);
  CHECK(still.acquired_at_ms == held.acquired_at_ms);

  CHECK(a->renew(30s).has_value());
  release(*a, finished(key, first, "owner-a", 3));
  const LockStatus freed = db.status(key);
  CHECK(freed.state == LockStatus::State::free);
  CHECK(freed.last_exit_code == std::optional<int>(3));

  const std::int64_t second = acquire(*b, request(key, "owner-b"));
  CHECK(second > first);
  const LockStatus retaken = db.status(key);
  CHECK(retaken.owner == "owner-b");
  CHECK(retaken.last_started_at_ms == retaken.acquired_at_ms);
  REQUIRE(retaken.last_started_at_ms.has_value());
  REQUIRE(held.last_started_at_ms.has_value());
  CHECK(*retaken.last_started_at_ms >= *held.last_started_at_ms);
  release(*b);

  // The same locker can take the key again after letting go; tokens keep growing.
  const std::int64_t third = acquire(*a, request(key, "owner-a"));
  CHECK(third > second);
  release(*a);

  auto runs = db.backend->history(key, 10);
  REQUIRE(runs.has_value());
  REQUIRE(runs->size() == 1);
  CHECK(runs->front().outcome == RunOutcome::failed);
  CHECK(runs->front().exit_code == std::optional<int>(3));
  CHECK(runs->front().token == first);
}

TEST_CASE("release and renew by the wrong owner or token are refused as lost") {
  Db db;
  const std::string key = test::unique_key("wrong-holder");
  auto a = db.locker();
  const std::int64_t token = acquire(*a, request(key, "owner-a"));

  auto wrong_owner = db.backend->release(key, by_owner("intruder"));
  REQUIRE_FALSE(wrong_owner.has_value());
  CHECK(wrong_owner.error().kind == ErrorKind::lost);
  auto wrong_token = db.backend->release(key, by_token(token + 1));
  REQUIRE_FALSE(wrong_token.has_value());
  CHECK(wrong_token.error().kind == ErrorKind::lost);
  auto mixed = db.backend->release(key, by_owner_and_token("owner-a", token + 7));
  REQUIRE_FALSE(mixed.has_value());
  CHECK(mixed.error().kind == ErrorKind::lost);

  auto renew_owner = db.backend->renew(key, by_owner("intruder"), 30s);
  REQUIRE_FALSE(renew_owner.has_value());
  CHECK(renew_owner.error().kind == ErrorKind::lost);
  auto renew_token = db.backend->renew(key, by_token(token - 1), 30s);
  REQUIRE_FALSE(renew_token.has_value());
  CHECK(renew_token.error().kind == ErrorKind::lost);

  // Nothing of that touched the holder.
  LockStatus s = db.status(key);
  CHECK(s.state == LockStatus::State::held);
  CHECK(s.owner == "owner-a");
  CHECK(s.token == token);
  CHECK(a->renew(30s).has_value());
  release(*a);

  // A key nobody holds has no holder to match either.
  auto nobody = db.backend->release(test::unique_key("never-held"), by_owner("owner-a"));
  REQUIRE_FALSE(nobody.has_value());
  CHECK(nobody.error().kind == ErrorKind::lost);
}

TEST_CASE("min_interval refuses with not_due and a plausible due_in, then lets the next run start") {
  Db db;
  const std::string key = test::unique_key("interval");
  const Millis interval = 2s;
  auto a = db.locker();
  const std::int64_t first = acquire(*a, request(key, "owner-a", 30s, interval));
  release(*a);

  auto b = db.locker();
  AcquireOutcome early = attempt(*b, request(key, "owner-b", 30s, interval));
  REQUIRE(early.state == AcquireOutcome::State::not_due);
  REQUIRE(early.due_in.has_value());
  CHECK(*early.due_in > 0ms);
  CHECK(*early.due_in <= interval);
  CHECK(db.status(key).state == LockStatus::State::free);

  // A long interval: due_in is what is left of it, not a rounded or default figure.
  AcquireOutcome long_wait = attempt(*b, request(key, "owner-b", 30s, 60s));
  REQUIRE(long_wait.state == AcquireOutcome::State::not_due);
  REQUIRE(long_wait.due_in.has_value());
  CHECK(*long_wait.due_in > 50s);
  CHECK(*long_wait.due_in <= 60s);

  // Without --min-interval the key is simply free.
  auto c = db.locker();
  const std::int64_t plain = acquire(*c, request(key, "owner-c"));
  CHECK(plain > first);
  release(*c);

  // The interval counts from the last start (owner-c's), so wait it out from there.
  std::this_thread::sleep_for(interval + 300ms);
  const std::int64_t later = acquire(*b, request(key, "owner-b", 30s, interval));
  CHECK(later > plain);
  release(*b);
}

}  // TEST_SUITE("all")

TEST_SUITE("lease") {

TEST_CASE("lease: a release that finds its row released meanwhile records the run as lost; history keeps its count") {
  Db db(2);
  const std::string key = test::unique_key("lost-run");
  auto a = db.locker();
  auto run_end = [](int exit_code) {
    ReleaseRequest rel;
    rel.finished_run = true;
    rel.exit_code = exit_code;
    rel.history = RunRecord{};
    rel.history->exit_code = exit_code;
    return rel;
  };
  for (int i = 0; i < 3; ++i) {
    acquire(*a, request(key, "owner-a"));
    auto ok = a->release(run_end(0));
    REQUIRE_MESSAGE(ok.has_value(), (ok ? std::string() : ok.error().message));
  }
  const std::int64_t token = acquire(*a, request(key, "owner-a"));
  REQUIRE(db.backend->release(key, by_token(token)).has_value());

  // No renew came between: the release itself finds the row no longer ours.
  auto late = a->release(run_end(3));
  REQUIRE_FALSE(late.has_value());
  CHECK(late.error().kind == ErrorKind::lost);
  auto runs = eventually([&] { return db.backend->history(key, 100); },
                         [&](const auto& r) { return r && !r->empty() && r->front().token == token; });
  REQUIRE(runs.has_value());
  REQUIRE(runs->size() == 2);
  CHECK(runs->front().token == token);
  CHECK(runs->front().outcome == RunOutcome::lost);
  CHECK(runs->front().exit_code == std::optional<int>(3));
  CHECK((*runs)[1].outcome == RunOutcome::ok);
  CHECK((*runs)[1].token == token - 1);

  // Keeping none: a run leaves no row.
  Db none(0);
  auto b = none.locker();
  acquire(*b, request(key, "owner-b"));
  REQUIRE(b->release(run_end(0)).has_value());
  auto kept = none.backend->history(key, 100);
  REQUIRE(kept.has_value());
  CHECK(kept->empty());
}

TEST_CASE("lease: stateless renew and release by the right holder; the locker then finds it lost") {
  Db db;
  const std::string key = test::unique_key("stateless");
  auto a = db.locker();
  const std::int64_t token = acquire(*a, request(key, "owner-a"));

  // The right holder, from another process: renew pushes expires_at, release frees.
  auto renewed = db.backend->renew(key, by_owner_and_token("owner-a", token), 60s);
  REQUIRE_MESSAGE(renewed.has_value(), (renewed ? std::string() : renewed.error().message));
  auto now = db.backend->now_ms();
  REQUIRE(now.has_value());
  CHECK(*renewed > *now + 50'000);
  CHECK(*renewed <= *now + 61'000);
  auto by_name = db.backend->renew(key, by_owner("owner-a"), 60s);
  CHECK(by_name.has_value());

  auto released = db.backend->release(key, by_token(token));
  REQUIRE_MESSAGE(released.has_value(), (released ? std::string() : released.error().message));
  CHECK(db.status(key).state == LockStatus::State::free);

  // The locker that held it learns it is gone.
  auto late = a->renew(30s);
  REQUIRE_FALSE(late.has_value());
  CHECK(late.error().kind == ErrorKind::lost);

  // --force frees whoever holds it, and a free key too.
  auto b = db.locker();
  acquire(*b, request(key, "owner-b"));
  CHECK(db.backend->release(key, forced()).has_value());
  CHECK(db.status(key).state == LockStatus::State::free);
  CHECK(db.backend->release(key, forced()).has_value());

  // The next holder's token is greater.
  auto c = db.locker();
  CHECK(acquire(*c, request(key, "owner-c")) > token);
  release(*c);
}

}  // TEST_SUITE("lease")

TEST_SUITE("session") {

TEST_CASE("session strategies: destroying the holder's locker frees the key at once") {
  Db db;
  const std::string key = test::unique_key("session-drop");
  auto a = db.locker();
  const std::int64_t first = acquire(*a, request(key, "owner-a"));
  auto b = db.locker();
  CHECK(attempt(*b, request(key, "owner-b")).state == AcquireOutcome::State::busy);

  a.reset();
  CHECK(db.status(key).state == LockStatus::State::free);
  CHECK(acquire(*b, request(key, "owner-b")) > first);
  release(*b);
}

TEST_CASE("session strategies: a waiting acquire gets the key soon after the holder lets go") {
  Db db;
  const std::string key = test::unique_key("wait");
  auto a = db.locker();
  auto b = db.locker();
  acquire(*a, request(key, "owner-a"));
  std::thread releaser([&] {
    std::this_thread::sleep_for(300ms);
    CHECK(a->release(ReleaseRequest{}).has_value());
  });
  const auto sent = std::chrono::steady_clock::now();
  auto got = b->try_acquire(request(key, "owner-b"), 3s);
  const auto waited = std::chrono::steady_clock::now() - sent;
  releaser.join();
  REQUIRE_MESSAGE(got.has_value(), (got ? std::string() : got.error().message));
  CHECK(got->state == AcquireOutcome::State::acquired);
  // The server wakes the waiter when the lock is released (~300 ms), not at the end of its wait.
  CHECK(waited < 2500ms);

  // A wait that runs out is busy, not an error. (`wait` is how long the server MAY block:
  // src/core/locker.hpp; how long it does is the backend's business.)
  auto c = db.locker();
  auto busy = c->try_acquire(request(key, "owner-c"), 200ms);
  REQUIRE(busy.has_value());
  CHECK(busy->state == AcquireOutcome::State::busy);
  release(*b);
}

TEST_CASE("session strategies: the server ending the holder's session frees the key; renew is lost") {
  Db db;
  const std::string key = test::unique_key("killed");
  auto a = db.locker();
  const std::int64_t first = acquire(*a, request(key, "owner-a"));
  const std::string session = test::holder_session(db.options.table_prefix, first);
  REQUIRE_FALSE(session.empty());
  test::kill_session(session);

  bool freed = false;
  for (int i = 0; i < 50 && !freed; ++i) {
    freed = db.status(key).state == LockStatus::State::free;
    if (!freed) std::this_thread::sleep_for(100ms);
  }
  CHECK(freed);
  auto b = db.locker();
  auto taken = b->try_acquire(request(key, "owner-b"), 2s);
  REQUIRE(taken.has_value());
  REQUIRE(taken->state == AcquireOutcome::State::acquired);
  CHECK(taken->token > first);
  auto renewed = a->renew(30s);
  REQUIRE_FALSE(renewed.has_value());
  CHECK(renewed.error().kind == ErrorKind::lost);
  CHECK(b->renew(30s).has_value());
  release(*b);
}

}  // TEST_SUITE("session")

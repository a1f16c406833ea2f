// Keys are data, never SQL; and a race for one key has exactly one winner.

#include <atomic>
#include <latch>
#include <mutex>
#include <thread>

#include "conformance/conformance_helpers.hpp"

using namespace dblock;
using namespace dblock::conformance;

namespace {

std::vector<std::string> nasty_keys() {
  std::string longest;
  while (longest.size() + 2 <= 254) longest += "\xc3\xa9";  // é
  longest += "z";
  std::vector<std::string> keys{
      "'", "\"", ";", "%", "_", "a b  c", "'); DROP TABLE x; --", "\\", "100%_done",
      "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x94\x92", longest, std::string(255, 'k'),
  };
  return keys;
}

}  // namespace

TEST_SUITE("all") {

TEST_CASE("nasty keys round-trip and the tables survive them") {
  Db db;
  const auto keys = nasty_keys();
  REQUIRE(keys[10].size() == 255);
  auto a = db.locker();
  auto b = db.locker();
  for (const std::string& key : keys) {
    CAPTURE(key);
    acquire(*a, request(key, "owner-a"));
    CHECK(attempt(*b, request(key, "owner-b")).state == AcquireOutcome::State::busy);
    LockStatus s = db.status(key);
    CHECK(s.key == key);
    CHECK(s.state == LockStatus::State::held);
    ReleaseRequest rel;
    rel.finished_run = true;
    rel.exit_code = 0;
    RunRecord run;
    run.owner = "owner-a";
    run.outcome = RunOutcome::ok;
    run.exit_code = 0;
    rel.history = run;
    release(*a, rel);
    auto runs = eventually([&] { return db.backend->history(key, 10); }, [](const auto& r) { return r && r->size() == 1; });
    REQUIRE(runs.has_value());
    REQUIRE(runs->size() == 1);
    CHECK(runs->front().key == key);
  }
  // "%" and "_" are not patterns: each key matched only itself.
  auto all = db.backend->status({});
  REQUIRE(all.has_value());
  CHECK(all->size() == keys.size());
  for (const LockStatus& s : *all) CHECK(s.state == LockStatus::State::free);
  CHECK(db.backend->ensure_schema().has_value());
  auto history = db.backend->history("", 100);
  REQUIRE(history.has_value());
  CHECK(history->size() == keys.size());
}

TEST_CASE("a key of 255 bytes of mixed UTF-8 is one lock; a key differing in its last byte is another") {
  Db db;
  std::string key = test::unique_key("k");
  const std::string pieces[] = {"a", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x94\x92"};  // 1-4 byte sequences
  for (int i = 0; key.size() < 245; ++i) key += pieces[i % 4];
  while (key.size() < 255) key += "z";
  REQUIRE(key.size() == 255);
  std::string sibling = key;
  sibling.back() = 'y';

  auto a = db.locker();
  auto b = db.locker();
  const std::int64_t first = acquire(*a, request(key, "owner-a"));
  CHECK(attempt(*b, request(key, "owner-b")).state == AcquireOutcome::State::busy);
  acquire(*b, request(sibling, "owner-b"));
  LockStatus s = db.status(key);
  CHECK(s.key == key);
  CHECK(s.state == LockStatus::State::held);
  CHECK(s.owner == "owner-a");
  CHECK(db.status(sibling).owner == "owner-b");
  CHECK(a->renew(30s).has_value());
  release(*a);
  release(*b);
  CHECK(db.status(key).state == LockStatus::State::free);

  auto c = db.locker();
  CHECK(acquire(*c, request(key, "owner-c")) > first);
  release(*c);
}

TEST_CASE("eight racers, each with its own connection: exactly one gets the key") {
  Db db;
  const std::string key = test::unique_key("race");
  constexpr int racers = 8;
  std::vector<std::unique_ptr<Backend>> backends(racers);
  std::vector<std::unique_ptr<Locker>> lockers(racers);
  std::vector<std::optional<AcquireOutcome>> outcomes(racers);
  std::vector<std::string> errors(racers);
  // Every thread opens its connection first, then counts down exactly once whatever
  // happened, and only the ready ones race: a latch decremented twice is undefined.
  std::latch start(racers);
  std::vector<std::thread> threads;
  for (int i = 0; i < racers; ++i) {
    threads.emplace_back([&, i] {
      try {
        backends[i] = test::open(db.options);
        auto made = backends[i]->make_locker(test::strategy());
        if (made) lockers[i] = std::move(*made);
        else errors[i] = made.error().message;
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
      start.arrive_and_wait();
      if (!lockers[i]) return;
      auto out = lockers[i]->try_acquire(request(key, "racer-" + std::to_string(i)), 0ms);
      if (out) outcomes[i] = *out;
      else errors[i] = out.error().message;
    });
  }
  for (auto& t : threads) t.join();

  int acquired = 0;
  int winner = -1;
  for (int i = 0; i < racers; ++i) {
    CAPTURE(i);
    CHECK_MESSAGE(errors[i].empty(), errors[i]);
    if (!outcomes[i]) continue;
    if (outcomes[i]->state == AcquireOutcome::State::acquired) {
      ++acquired;
      winner = i;
    } else {
      CHECK(outcomes[i]->state == AcquireOutcome::State::busy);
    }
  }
  CHECK(acquired == 1);
  REQUIRE(winner >= 0);
  CHECK(db.status(key).owner == "racer-" + std::to_string(winner));
  release(*lockers[winner]);
  lockers.clear();
  backends.clear();
}

TEST_CASE("six contenders holding in turn: never two at once, tokens strictly increasing") {
  Db db;
  const std::string key = test::unique_key("contenders");
  std::mutex m;
  std::vector<std::int64_t> tokens;
  std::vector<std::string> errors;
  std::atomic<int> inside{0}, overlaps{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      auto note = [&](const std::string& e) {
        std::lock_guard g(m);
        errors.push_back(e);
      };
      try {
        auto backend = test::open(db.options);
        auto made = backend->make_locker(test::strategy());
        if (!made) return note(made.error().message);
        Locker& l = **made;
        // Each contender tries until it has held the key twice, bounded by a deadline, so a
        // loaded machine slows the test down instead of starving a thread into a false failure.
        const auto deadline = std::chrono::steady_clock::now() + 20s;
        for (int held = 0; held < 2 && std::chrono::steady_clock::now() < deadline;) {
          auto got = l.try_acquire(request(key, "T" + std::to_string(t)), is_lease() ? 0ms : 200ms);
          if (!got) {
            note(got.error().message);
            continue;
          }
          if (got->state != AcquireOutcome::State::acquired) {
            std::this_thread::sleep_for(5ms);
            continue;
          }
          ++held;
          if (inside.fetch_add(1) != 0) ++overlaps;
          {
            std::lock_guard g(m);
            tokens.push_back(got->token);
          }
          std::this_thread::sleep_for(10ms);
          inside.fetch_sub(1);
          if (auto ok = l.release(ReleaseRequest{}); !ok) note(ok.error().message);
        }
      } catch (const std::exception& e) {
        note(e.what());
      }
    });
  for (auto& th : threads) th.join();
  for (const auto& e : errors) MESSAGE(e);
  CHECK(errors.empty());
  CHECK(overlaps == 0);
  CHECK(tokens.size() == 12);
  for (std::size_t i = 1; i < tokens.size(); ++i) CHECK(tokens[i] > tokens[i - 1]);
}

}  // TEST_SUITE("all")

// Keys are data, never SQL; and a race for one key has exactly one winner.

#include <latch>
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
    auto runs = db.backend->history(key, 10);
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

TEST_CASE("eight racers, each with its own connection: exactly one gets the key") {
  Db db;
  const std::string key = test::unique_key("race");
  constexpr int racers = 8;
  std::vector<std::unique_ptr<Backend>> backends(racers);
  std::vector<std::unique_ptr<Locker>> lockers(racers);
  std::vector<std::optional<AcquireOutcome>> outcomes(racers);
  std::vector<std::string> errors(racers);
  std::latch start(racers);
  std::vector<std::thread> threads;
  for (int i = 0; i < racers; ++i) {
    threads.emplace_back([&, i] {
      try {
        backends[i] = test::open(db.options);
        auto made = backends[i]->make_locker(test::strategy());
        if (!made) {
          errors[i] = made.error().message;
          start.count_down();
          return;
        }
        lockers[i] = std::move(*made);
        start.arrive_and_wait();
        auto out = lockers[i]->try_acquire(request(key, "racer-" + std::to_string(i)), 0ms);
        if (out) outcomes[i] = *out;
        else errors[i] = out.error().message;
      } catch (const std::exception& e) {
        errors[i] = e.what();
        start.count_down();
      }
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
  if (winner >= 0) {
    CHECK(db.status(key).owner == "racer-" + std::to_string(winner));
    release(*lockers[winner]);
  }
  lockers.clear();
  backends.clear();
}

// Semaphores (--slots N, core/semaphore.hpp, docs/backend-contract.md "Semaphores"): core's
// semaphore locker over each backend's plain locker. The same cases on every backend x strategy:
// at most N holders, tokens strictly increasing per key across slots, one slot count per key.

#include <algorithm>
#include <atomic>
#include <latch>
#include <mutex>
#include <thread>

#include "conformance/conformance_helpers.hpp"
#include "core/semaphore.hpp"

using namespace dblock;
using namespace dblock::conformance;

namespace {

std::unique_ptr<Locker> semaphore(const Db& db, int slots) { return make_semaphore_locker(db.locker(), slots); }

LockRequest slot_request(const std::string& key, const std::string& owner, int slots) {
  LockRequest req = request(key, owner);
  req.slots = slots;
  return req;
}

AcquireOutcome try_once(Locker& locker, const LockRequest& req) {
  auto out = locker.try_acquire(req, 0ms);
  REQUIRE_MESSAGE(out.has_value(), (out ? std::string() : out.error().message));
  return *out;
}

int slot_count(const Db& db, const std::string& key) {
  auto n = db.backend->slot_count(key);
  REQUIRE_MESSAGE(n.has_value(), (n ? std::string() : n.error().message));
  return *n;
}

}  // namespace

TEST_SUITE("all") {

TEST_CASE("semaphore: N holders at once, the next one busy, a freed slot taken, tokens strictly increasing") {
  Db db;
  const std::string key = test::unique_key("sem");
  auto a = semaphore(db, 2), b = semaphore(db, 2), c = semaphore(db, 2);

  AcquireOutcome got_a = try_once(*a, slot_request(key, "owner-a", 2));
  REQUIRE(got_a.state == AcquireOutcome::State::acquired);
  CHECK(got_a.slot == 0);
  AcquireOutcome got_b = try_once(*b, slot_request(key, "owner-b", 2));
  REQUIRE(got_b.state == AcquireOutcome::State::acquired);
  CHECK(got_b.slot == 1);
  CHECK(got_b.token > got_a.token);
  CHECK(slot_count(db, key) == 2);

  AcquireOutcome busy = try_once(*c, slot_request(key, "owner-c", 2));
  CHECK(busy.state == AcquireOutcome::State::busy);
  REQUIRE(busy.holder.has_value());
  CHECK(busy.holder->key == key);

  // Both slots show their holders, each with the token it was given.
  CHECK(db.status(slot_row_name(key, 0)).state == LockStatus::State::held);
  CHECK(db.status(slot_row_name(key, 0)).owner == "owner-a");
  CHECK(db.status(slot_row_name(key, 0)).token == got_a.token);
  CHECK(db.status(slot_row_name(key, 1)).owner == "owner-b");
  CHECK(db.status(slot_row_name(key, 1)).token == got_b.token);

  ReleaseRequest done;
  RunRecord run;
  run.key = key;
  done.history = run;
  release(*a, done);
  AcquireOutcome got_c = try_once(*c, slot_request(key, "owner-c", 2));
  REQUIRE(got_c.state == AcquireOutcome::State::acquired);
  CHECK(got_c.slot == 0);
  CHECK(got_c.token > got_b.token);
  CHECK(db.status(key).token == got_c.token);  // the header issued it

  release(*b, done);
  release(*c, done);
  // The runs are the key's history, each with its slot's token.
  auto runs = db.backend->history(key, 10);
  REQUIRE(runs.has_value());
  REQUIRE(runs->size() == 3);
  CHECK((*runs)[0].token == got_c.token);
  CHECK((*runs)[2].token == got_a.token);
  CHECK(db.status(slot_row_name(key, 0)).state != LockStatus::State::held);
}

TEST_CASE("semaphore: another slot count is refused while a slot is held, and taken once the semaphore is idle") {
  Db db;
  const std::string key = test::unique_key("sem-count");
  auto a = semaphore(db, 2);
  const std::int64_t first = acquire(*a, slot_request(key, "owner-a", 2));

  auto b = semaphore(db, 3);
  auto refused = b->try_acquire(slot_request(key, "owner-b", 3), 0ms);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().kind == ErrorKind::config);
  CHECK(refused.error().message.find("semaphore of 2 slots") != std::string::npos);

  // A plain lock of the key finds the header held, as a semaphore (core refuses it).
  auto plain = db.locker();
  AcquireOutcome out = try_once(*plain, request(key, "owner-p"));
  CHECK(out.state != AcquireOutcome::State::acquired);
  REQUIRE(out.holder.has_value());
  CHECK(out.holder->strategy == semaphore_marker);

  release(*a);
  const std::int64_t later = acquire(*b, slot_request(key, "owner-b", 3));
  CHECK(later > first);
  CHECK(slot_count(db, key) == 3);
  release(*b);
}

TEST_CASE("semaphore: a held plain lock keeps the slots busy; a free one becomes a semaphore and its tokens go on") {
  Db db;
  const std::string key = test::unique_key("sem-plain");
  auto plain = db.locker();
  const std::int64_t plain_token = acquire(*plain, request(key, "owner-p"));
  CHECK(slot_count(db, key) == 0);

  auto a = semaphore(db, 2);
  AcquireOutcome busy = try_once(*a, slot_request(key, "owner-a", 2));
  CHECK(busy.state == AcquireOutcome::State::busy);
  REQUIRE(busy.holder.has_value());
  CHECK(busy.holder->owner == "owner-p");

  release(*plain);
  AcquireOutcome got = try_once(*a, slot_request(key, "owner-a", 2));
  REQUIRE(got.state == AcquireOutcome::State::acquired);
  CHECK(got.token > plain_token);
  CHECK(slot_count(db, key) == 2);
  release(*a);
}

TEST_CASE("semaphore: a locks table from before semaphores gets the slots column on the first slot taken") {
  Db db;
  const std::string key = test::unique_key("sem-old");
  auto plain = db.locker();
  const std::int64_t plain_token = acquire(*plain, request(key, "owner-p"));
  release(*plain);
  // An older dblock's table: no slots column. Plain locks, status and doctor's check need none.
  test::admin_sql("ALTER TABLE " + db.options.table_prefix + "locks DROP COLUMN slots");
  auto checked = db.backend->check_schema();
  CHECK_MESSAGE(checked.has_value(), (checked ? std::string() : checked.error().message));
  CHECK(slot_count(db, key) == 0);

  auto a = semaphore(db, 2);
  AcquireOutcome got = try_once(*a, slot_request(key, "owner-a", 2));
  REQUIRE(got.state == AcquireOutcome::State::acquired);
  CHECK(got.token > plain_token);
  CHECK(slot_count(db, key) == 2);
  release(*a);
}

TEST_CASE("semaphore: a plain lock never takes the header, held slots or not") {
  Db db;
  const std::string key = test::unique_key("sem-idle");
  auto a = semaphore(db, 2);
  const std::int64_t token = acquire(*a, slot_request(key, "owner-a", 2));
  release(*a);
  auto plain = db.locker();
  AcquireOutcome out = try_once(*plain, request(key, "owner-p"));
  CHECK(out.state != AcquireOutcome::State::acquired);
  REQUIRE(out.holder.has_value());
  CHECK(out.holder->strategy == semaphore_marker);
  CHECK(db.status(key).token == token);  // no token used
  CHECK(slot_count(db, key) == 2);
}

}  // TEST_SUITE

// Every backend: what the MySQL work found (concurrent holders of one key, releases at once).
TEST_SUITE("all") {

TEST_CASE("semaphore: a run's history row starts when its slot was taken, whatever slots were taken since") {
  Db db;
  const std::string key = test::unique_key("sem-started");
  auto a = semaphore(db, 2), b = semaphore(db, 2);
  const std::int64_t token_a = acquire(*a, slot_request(key, "owner-a", 2));
  const LockStatus slot_a = db.status(slot_row_name(key, 0));
  std::this_thread::sleep_for(20ms);  // b's acquired_at (now the header's) differs from a's
  acquire(*b, slot_request(key, "owner-b", 2));

  ReleaseRequest done;
  RunRecord run;
  run.key = key;
  done.history = run;
  release(*a, done);
  auto runs = db.backend->history(key, 10);
  REQUIRE(runs.has_value());
  REQUIRE(runs->size() == 1);
  CHECK(runs->front().token == token_a);
  REQUIRE(slot_a.acquired_at_ms.has_value());
  CHECK(runs->front().started_at_ms == *slot_a.acquired_at_ms);
  release(*b, done);
}

TEST_CASE("semaphore: racing holders never exceed the slots, every slot taken gets its own token, every run its history row") {
  Db db;
  const std::string key = test::unique_key("sem-race");
  constexpr int slots = 2, threads = 4, rounds = 5;
  std::atomic<int> holding{0}, most{0};
  std::mutex mu;
  std::vector<std::int64_t> tokens;
  std::vector<std::string> errors;
  std::vector<std::unique_ptr<Db>> dbs;  // one connection per thread, as one per process
  std::vector<std::unique_ptr<Locker>> lockers;
  for (int i = 0; i < threads; ++i) {
    dbs.push_back(db.another());
    lockers.push_back(semaphore(*dbs.back(), slots));
  }
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i)
    pool.emplace_back([&, i] {
      for (int round = 0; round < rounds; ++round) {
        bool got = false;
        for (int tries = 0; tries < 2000 && !got; ++tries) {
          auto out = lockers[i]->try_acquire(slot_request(key, "owner-" + std::to_string(i), slots), 0ms);
          {
            std::lock_guard lock(mu);
            if (!out) {
              errors.push_back(out.error().message);
              return;
            }
            if (out->state == AcquireOutcome::State::acquired) {
              tokens.push_back(out->token);
              got = true;
            }
          }
          // A waiter backs off between tries (jittered), as core does: spinners that hardly pause
          // keep a single-writer database (SQLite) from committing the holder's release, whose
          // busy handler sleeps between its own tries; under load that ran out its busy timeout.
          if (!got) std::this_thread::sleep_for(std::chrono::milliseconds(2 + (tries + i) % 9));
        }
        if (!got) {
          std::lock_guard lock(mu);
          errors.push_back("never acquired");
          return;
        }
        const int now = ++holding;
        for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
        }
        std::this_thread::sleep_for(5ms);
        --holding;
        ReleaseRequest done;  // with its history row: releases of one key's slots at once
        RunRecord run;
        run.key = key;
        done.history = run;
        if (auto r = lockers[i]->release(done); !r) {
          std::lock_guard lock(mu);
          errors.push_back(r.error().message);
        }
      }
    });
  for (auto& t : pool) t.join();
  CHECK_MESSAGE(errors.empty(), (errors.empty() ? std::string() : errors.front()));
  CHECK(most.load() <= slots);
  CHECK(tokens.size() == static_cast<std::size_t>(threads * rounds));
  std::sort(tokens.begin(), tokens.end());
  CHECK(std::adjacent_find(tokens.begin(), tokens.end()) == tokens.end());
  CHECK(db.status(key).token == tokens.back());
  auto runs = db.backend->history(key, 100);
  REQUIRE(runs.has_value());
  CHECK(runs->size() == tokens.size());
}

TEST_CASE("semaphore: holders of one key releasing at the same instant all record their runs") {
  Db db;
  const std::string key = test::unique_key("sem-release");
  constexpr int slots = 3, rounds = 8;
  std::vector<std::unique_ptr<Db>> dbs;  // one connection per thread, as one per process
  std::vector<std::unique_ptr<Locker>> lockers;
  for (int i = 0; i < slots; ++i) {
    dbs.push_back(db.another());
    lockers.push_back(semaphore(*dbs.back(), slots));
  }
  for (int round = 0; round < rounds; ++round) {
    for (int i = 0; i < slots; ++i) acquire(*lockers[i], slot_request(key, "owner-" + std::to_string(i), slots));
    std::latch go(slots);
    std::vector<Result<void>> released(slots);
    std::vector<std::thread> pool;
    for (int i = 0; i < slots; ++i)
      pool.emplace_back([&, i] {
        ReleaseRequest done;
        RunRecord run;
        run.key = key;
        done.history = run;
        go.arrive_and_wait();
        released[i] = lockers[i]->release(done);
      });
    for (auto& t : pool) t.join();
    for (const auto& r : released) CHECK_MESSAGE(r.has_value(), (r ? std::string() : r.error().message));
  }
  auto runs = db.backend->history(key, 100);
  REQUIRE(runs.has_value());
  CHECK(runs->size() == static_cast<std::size_t>(slots * rounds));
}

}  // TEST_SUITE

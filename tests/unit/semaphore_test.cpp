// core/semaphore: slot row names, --slots limits, the plain-lock refusal in the wait loop.
#include <doctest/doctest.h>

#include "core/acquire_loop.hpp"
#include "core/key.hpp"
#include "core/semaphore.hpp"
#include "support/fake_locker.hpp"

using namespace dblock;

TEST_CASE("slot rows: named key, separator, number; parsed back; never a user's key") {
  const std::string row = slot_row_name("backup", 7);
  CHECK(row == std::string("backup\x1f" "7"));
  auto parsed = parse_slot_row(row);
  REQUIRE(parsed.has_value());
  CHECK(parsed->key == "backup");
  CHECK(parsed->slot == 7);
  CHECK(key_of_row(row) == "backup");
  CHECK(key_of_row("backup") == "backup");
  CHECK_FALSE(parse_slot_row("backup").has_value());
  CHECK_FALSE(parse_slot_row(std::string("backup\x1f")).has_value());
  CHECK_FALSE(parse_slot_row(std::string("backup\x1f" "x")).has_value());
  CHECK_FALSE(validate_key(row).has_value());  // the separator is a control character
}

TEST_CASE("--slots: 1 to 1000, and the key short enough for its last slot's row") {
  CHECK(validate_slots("k", 1).has_value());
  CHECK(validate_slots("k", max_slots).has_value());
  CHECK(validate_slots("k", 0).error().kind == ErrorKind::usage);
  CHECK(validate_slots("k", max_slots + 1).error().kind == ErrorKind::usage);
  CHECK(validate_slots(std::string(253, 'k'), 10).has_value());   // "\x1f9": 255 bytes
  auto too_long = validate_slots(std::string(253, 'k'), 11);       // "\x1f10": 256 bytes
  REQUIRE_FALSE(too_long.has_value());
  CHECK(too_long.error().message.find("at most 252 bytes with --slots 11") != std::string::npos);
}

TEST_CASE("a plain lock that finds a semaphore's header is refused at once, not waited on") {
  auto script = std::make_shared<test::FakeScript>();
  script->busy_attempts = 1000;
  LockStatus header;
  header.key = "k";
  header.state = LockStatus::State::held;
  header.strategy = std::string(semaphore_marker);
  script->holder = header;
  auto locker = test::make_fake_locker(script);
  LockRequest req;
  req.key = "k";
  auto waited = acquire_with_wait(*locker, req, Millis(5000));
  REQUIRE_FALSE(waited.has_value());
  CHECK(waited.error().kind == ErrorKind::config);
  CHECK(waited.error().message.find("is a semaphore") != std::string::npos);
  CHECK(script->attempts == 1);
}

TEST_CASE("the semaphore locker tries every slot in order and reports the slot it took") {
  auto script = std::make_shared<test::FakeScript>();
  script->busy_attempts = 2;  // slots 0 and 1 busy, slot 2 free
  auto locker = make_semaphore_locker(test::make_fake_locker(script), 3);
  LockRequest req;
  req.key = "k";
  req.slots = 3;
  auto out = locker->try_acquire(req, Millis(0));
  REQUIRE(out.has_value());
  CHECK(out->state == AcquireOutcome::State::acquired);
  CHECK(out->slot == 2);
  CHECK(script->attempts == 3);
  for (Millis wait : script->attempt_waits) CHECK(wait == Millis(0));  // none blocks on one slot
}

TEST_CASE("a semaphore waiter waits on one slot per attempt, a different one each time") {
  for (const int fd : {-1, 0}) {
    // -1: a backend that blocks on the slot; 0: one that wakes core through a descriptor and
    // only starts listening (or queueing for the place of the one that listens) with the wait.
    auto script = std::make_shared<test::FakeScript>();
    script->busy_attempts = 1000;
    script->wakeup_fd = fd;
    auto locker = make_semaphore_locker(test::make_fake_locker(script), 2);
    LockRequest req;
    req.key = "k";
    req.slots = 2;
    for (int round = 0; round < 2; ++round) {
      auto out = locker->try_acquire(req, Millis(500));
      REQUIRE(out.has_value());
      CHECK(out->state == AcquireOutcome::State::busy);
    }
    // Both slots at once, then one slot for the slice: slot 0, then slot 1.
    CHECK(script->attempt_waits == std::vector<Millis>{Millis(0), Millis(0), Millis(500), Millis(0), Millis(0), Millis(500)});
  }
}

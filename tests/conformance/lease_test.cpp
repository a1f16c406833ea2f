// What only the lease strategy promises: a lock frees itself at expires_at, and --min-hold
// keeps it after release. Session locks go with their session instead (suite "session").

#include "conformance/conformance_helpers.hpp"
#include "core/semaphore.hpp"

using namespace dblock;
using namespace dblock::conformance;

namespace {

// `key` taken by owner-a and released at once with --min-hold `hold`: the token it had.
std::int64_t released_holding(const Db& db, const std::string& key, decltype(ReleaseRequest::min_hold) hold) {
  auto a = db.locker();
  const std::int64_t token = acquire(*a, request(key, "owner-a", 30s));
  ReleaseRequest rel;
  rel.min_hold = hold;
  release(*a, rel);
  return token;
}

}  // namespace

TEST_SUITE("lease") {

TEST_CASE("lease: an expired lease is taken by another owner with a greater token") {
  Db db;
  const std::string key = test::unique_key("expiry");
  auto a = db.locker();
  const std::int64_t first = acquire(*a, request(key, "owner-a", 1s));

  auto b = db.locker();
  CHECK(attempt(*b, request(key, "owner-b", 1s)).state == AcquireOutcome::State::busy);

  std::this_thread::sleep_for(1500ms);
  CHECK(db.status(key).state == LockStatus::State::expired);

  const std::int64_t second = acquire(*b, request(key, "owner-b", 30s));
  CHECK(second > first);
  CHECK(db.status(key).owner == "owner-b");

  auto renew = a->renew(30s);
  REQUIRE_FALSE(renew.has_value());
  CHECK(renew.error().kind == ErrorKind::lost);
  auto stale = db.backend->renew(key, by_owner_and_token("owner-a", first), 30s);
  REQUIRE_FALSE(stale.has_value());
  CHECK(stale.error().kind == ErrorKind::lost);

  CHECK(db.status(key).state == LockStatus::State::held);
  release(*b);
}

TEST_CASE("lease: a renewed lease outlives its first ttl") {
  Db db;
  const std::string key = test::unique_key("renew");
  auto a = db.locker();
  acquire(*a, request(key, "owner-a", 1s));
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(500ms);
    auto ok = a->renew(1s);
    REQUIRE_MESSAGE(ok.has_value(), (ok ? std::string() : ok.error().message));
  }
  LockStatus s = db.status(key);
  CHECK(s.state == LockStatus::State::held);
  REQUIRE(s.renewed_at_ms.has_value());
  REQUIRE(s.acquired_at_ms.has_value());
  CHECK(*s.renewed_at_ms >= *s.acquired_at_ms + 1000);
  auto b = db.locker();
  CHECK(attempt(*b, request(key, "owner-b")).state == AcquireOutcome::State::busy);
  release(*a);
}

TEST_CASE("lease: min_hold keeps the lock after release until acquired_at + min_hold") {
  Db db;
  const std::string key = test::unique_key("min-hold");
  const auto started = std::chrono::steady_clock::now();
  const std::int64_t first = released_holding(db, key, 2s);

  LockStatus s = db.status(key);
  CHECK(s.state == LockStatus::State::held);
  REQUIRE(s.expires_at_ms.has_value());
  REQUIRE(s.acquired_at_ms.has_value());
  CHECK(*s.expires_at_ms == *s.acquired_at_ms + 2000);

  auto b = db.locker();
  CHECK(attempt(*b, request(key, "owner-b")).state == AcquireOutcome::State::busy);

  std::this_thread::sleep_until(started + 2300ms);
  CHECK(acquire(*b, request(key, "owner-b")) > first);
  release(*b);

  // A min_hold already past leaves the key free at once.
  auto c = db.locker();
  acquire(*c, request(key, "owner-c"));
  std::this_thread::sleep_for(200ms);
  ReleaseRequest rel;
  rel.min_hold = 100ms;
  release(*c, rel);
  CHECK(db.status(key).state == LockStatus::State::free);
}

TEST_CASE("lease: a key released under --min-hold becomes a semaphore only once the hold ends") {
  Db db;
  const std::string key = test::unique_key("min-hold-sem");
  const auto started = std::chrono::steady_clock::now();
  const std::int64_t first = released_holding(db, key, 1500ms);

  auto sem = make_semaphore_locker(db.locker(), 2);
  LockRequest slot = request(key, "owner-s");
  slot.slots = 2;
  CHECK(attempt(*sem, slot).state == AcquireOutcome::State::busy);

  std::this_thread::sleep_until(started + 1800ms);
  CHECK(acquire(*sem, slot) > first);
  release(*sem);
}

}  // TEST_SUITE("lease")

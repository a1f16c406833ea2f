// Mutual exclusion, fencing tokens and owner-checked release: what every strategy promises.

#include "conformance/conformance_helpers.hpp"

using namespace dblock;
using namespace dblock::conformance;

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

TEST_CASE("a free key is acquired, a second owner is refused, release frees it, the token grows") {
  Db db;
  const std::string key = test::unique_key("basic");
  auto a = db.locker();
  auto b = db.locker();

  const std::int64_t first = acquire(*a, request(key, "owner-a"));

  AcquireOutcome refused = attempt(*b, request(key, "owner-b"));
  CHECK(refused.state == AcquireOutcome::State::busy);
  if (refused.holder) {
    CHECK(refused.holder->owner == "owner-a");
    CHECK(refused.holder->token == first);
  }
  CHECK(db.status(key).state == LockStatus::State::held);

  release(*a);
  CHECK(db.status(key).state == LockStatus::State::free);

  const std::int64_t second = acquire(*b, request(key, "owner-b"));
  CHECK(second > first);
  CHECK(db.status(key).owner == "owner-b");
  release(*b);

  // The same locker can take the key again after letting go; tokens keep growing.
  const std::int64_t third = acquire(*a, request(key, "owner-a"));
  CHECK(third > second);
  release(*a);
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

  if (is_lease()) {
    // The right holder, from another process: renew pushes expires_at, release frees.
    auto renewed = db.backend->renew(key, by_owner_and_token("owner-a", token), 60s);
    REQUIRE_MESSAGE(renewed.has_value(), (renewed ? std::string() : renewed.error().message));
    auto now = db.backend->now_ms();
    REQUIRE(now.has_value());
    CHECK(*renewed > *now + 50'000);
    CHECK(*renewed <= *now + 61'000);

    auto released = db.backend->release(key, by_token(token));
    REQUIRE_MESSAGE(released.has_value(), (released ? std::string() : released.error().message));
    CHECK(db.status(key).state == LockStatus::State::free);

    // The locker that held it learns it is gone.
    auto late = a->renew(30s);
    REQUIRE_FALSE(late.has_value());
    CHECK(late.error().kind == ErrorKind::lost);

    // --force frees whoever holds it.
    auto b = db.locker();
    acquire(*b, request(key, "owner-b"));
    CHECK(db.backend->release(key, forced()).has_value());
    CHECK(db.status(key).state == LockStatus::State::free);
    auto c = db.locker();
    CHECK(acquire(*c, request(key, "owner-c")) > token);
    release(*c);
  } else {
    release(*a);
  }
}

TEST_CASE("session strategies: destroying the holder's locker frees the key at once") {
  if (is_lease()) return;  // a lease is left to expire by design
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

TEST_CASE("min_interval refuses with not_due and a plausible due_in, then lets the next run start") {
  Db db;
  const std::string key = test::unique_key("interval");
  const Millis interval = 2s;
  auto a = db.locker();
  const auto started = std::chrono::steady_clock::now();
  const std::int64_t first = acquire(*a, request(key, "owner-a", 30s, interval));
  release(*a);

  auto b = db.locker();
  AcquireOutcome early = attempt(*b, request(key, "owner-b", 30s, interval));
  REQUIRE(early.state == AcquireOutcome::State::not_due);
  REQUIRE(early.due_in.has_value());
  CHECK(*early.due_in > 0ms);
  CHECK(*early.due_in <= interval);
  CHECK(db.status(key).state == LockStatus::State::free);

  // Without --min-interval the key is simply free.
  auto c = db.locker();
  const std::int64_t plain = acquire(*c, request(key, "owner-c"));
  CHECK(plain > first);
  release(*c);

  // The interval counts from the last start (owner-c's), so wait it out from there.
  std::this_thread::sleep_for(interval + 300ms);
  CHECK(std::chrono::steady_clock::now() - started < 30s);
  const std::int64_t later = acquire(*b, request(key, "owner-b", 30s, interval));
  CHECK(later > plain);
  release(*b);
}

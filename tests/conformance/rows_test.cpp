// How a row of <prefix>locks reads back: the state rule of docs/backend-contract.md (States),
// which every backend applies through src/core/sql/lock_rows.hpp.

#include "conformance/conformance_helpers.hpp"

using namespace dblock;
using namespace dblock::conformance;

TEST_SUITE("lease") {
  TEST_CASE("a released lease reads free, in status and as the holder of a refused attempt") {
    Db db;
    const std::string key = test::unique_key("released");
    auto a = db.locker();
    const std::int64_t token = acquire(*a, request(key, "owner-a", 30s));
    release(*a);

    LockStatus s = db.status(key);
    CHECK(s.state == LockStatus::State::free);
    CHECK(s.token == token);
    CHECK(s.released_at_ms.has_value());

    // --min-interval refuses the next start; whatever the answer says about the last holder must
    // not call a released lease "expired" (the holder did let go).
    auto b = db.locker();
    AcquireOutcome out = attempt(*b, request(key, "owner-b", 30s, 60s));
    CHECK(out.state == AcquireOutcome::State::not_due);
    if (out.holder) {
      CHECK(out.holder->state == LockStatus::State::free);
      CHECK(out.holder->token == token);
    }

    // A live lease is held, in status and in a busy answer alike.
    const std::int64_t next = acquire(*b, request(key, "owner-b", 30s));
    auto c = db.locker();
    AcquireOutcome busy = attempt(*c, request(key, "owner-c", 30s));
    CHECK(busy.state == AcquireOutcome::State::busy);
    REQUIRE(busy.holder.has_value());
    CHECK(busy.holder->state == LockStatus::State::held);
    CHECK(busy.holder->token == next);
    CHECK(db.status(key).state == LockStatus::State::held);
    release(*b);
  }

  TEST_CASE("a lease that lapsed and was then released by its owner reads free") {
    Db db;
    const std::string key = test::unique_key("lapsed");
    auto a = db.locker();
    const std::int64_t token = acquire(*a, request(key, "owner-a", 1s));
    std::this_thread::sleep_for(1300ms);
    CHECK(db.status(key).state == LockStatus::State::expired);
    auto released = db.backend->release(key, by_owner_and_token("owner-a", token));
    REQUIRE_MESSAGE(released.has_value(), (released ? std::string() : released.error().message));
    CHECK(db.status(key).state == LockStatus::State::free);
  }
}

TEST_SUITE("all") {
  TEST_CASE("status lists and looks up released keys alike; never-taken keys are free at token 0") {
    Db db;
    const std::string first = test::unique_key("rows-a");
    const std::string second = test::unique_key("rows-b");
    const std::string never = test::unique_key("rows-never");
    for (const std::string& key : {first, second}) {
      auto l = db.locker();
      acquire(*l, request(key, "owner-" + key));
      release(*l);
    }

    std::vector<std::string> keys{second, never, first, second};
    auto asked = db.backend->status(keys);
    REQUIRE_MESSAGE(asked.has_value(), (asked ? std::string() : asked.error().message));
    REQUIRE(asked->size() == keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) {
      CAPTURE(keys[i]);
      CHECK((*asked)[i].key == keys[i]);
      CHECK((*asked)[i].state == LockStatus::State::free);
      CHECK((*asked)[i].db_now_ms > 0);
    }
    CHECK((*asked)[1].token == 0);
    CHECK((*asked)[1].strategy.empty());
    CHECK_FALSE((*asked)[1].acquired_at_ms.has_value());
    CHECK((*asked)[0].token >= 1);
    CHECK((*asked)[0].released_at_ms.has_value());
    if (test::strategy() != Strategy::lease) CHECK_FALSE((*asked)[0].expires_at_ms.has_value());

    // Every key: the two that have rows, in key order, read as the lookup read them.
    auto all = db.backend->status({});
    REQUIRE(all.has_value());
    REQUIRE(all->size() == 2);
    CHECK((*all)[0].key == std::min(first, second));
    CHECK((*all)[1].key == std::max(first, second));
    for (const LockStatus& s : *all) {
      CHECK(s.state == LockStatus::State::free);
      CHECK(s.strategy == to_string(test::strategy()));
    }
  }
}

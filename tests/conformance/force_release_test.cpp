// `dblock release --force` from another process means the same on every backend
// (man/dblock.1, docs/backend-contract.md): the lock is really free afterwards and its old
// holder finds it lost at its next renew (so `run` exits 76) and at its release.

#include "conformance/conformance_helpers.hpp"

using namespace dblock;
using namespace dblock::conformance;

namespace {

void expect_lost(const Result<void>& r, const char* what) {
  INFO(what);
  REQUIRE_FALSE(r.has_value());
  INFO(r.error().message);
  CHECK(r.error().kind == ErrorKind::lost);
}

struct Holder {
  std::unique_ptr<Locker> locker;
  std::int64_t token;
};

// owner-a takes the key, then another process releases it with --force; the old holder's
// first renew must find the lock lost.
Holder acquire_then_force(const Db& db, const std::string& key) {
  Holder h{db.locker(), 0};
  h.token = acquire(*h.locker, request(key, "owner-a"));
  auto ok = db.backend->release(key, forced());
  REQUIRE_MESSAGE(ok.has_value(), (ok ? std::string() : ok.error().message));
  expect_lost(h.locker->renew(30s), "the old holder's renew");
  return h;
}

}  // namespace

TEST_SUITE("session") {
  // The server lock lives in the holder's session: marking the row alone would leave the key
  // locked while status says free and the holder's renewals keep succeeding.
  TEST_CASE("release --force ends the session holder: its renew is lost, status free, the next token greater") {
    Db db;
    const std::string key = test::unique_key("force-session");
    auto [holder, first] = acquire_then_force(db, key);
    CHECK(db.status(key).state == LockStatus::State::free);

    auto next = db.locker();
    const std::int64_t second = acquire(*next, request(key, "owner-b"));
    CHECK(second > first);
    CHECK(db.status(key).state == LockStatus::State::held);

    expect_lost(holder->release({}), "the old holder's release");
    CHECK(db.status(key).owner == "owner-b");
    release(*next);
    CHECK(db.status(key).state == LockStatus::State::free);
  }
}

TEST_SUITE("lease") {
  TEST_CASE("release --force of a lease: the old holder's renew and release are lost; its min_hold does not re-lock") {
    Db db;
    const std::string key = test::unique_key("force-lease");
    auto [holder, first] = acquire_then_force(db, key);
    CHECK(db.status(key).state == LockStatus::State::free);

    ReleaseRequest late;
    late.min_hold = 60s;
    late.finished_run = true;
    late.exit_code = 0;
    expect_lost(holder->release(late), "the old holder's release");
    CHECK(db.status(key).state == LockStatus::State::free);

    auto next = db.locker();
    const std::int64_t second = acquire(*next, request(key, "owner-b"));
    CHECK(second > first);
    release(*next);
  }
}

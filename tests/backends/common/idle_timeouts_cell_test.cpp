// Servers end idle sessions (MariaDB's wait_timeout, PostgreSQL's idle_session_timeout); a
// held lock must outlive them. SQLite has no such killer, so the one body is registered in each
// server's suite ("mysql", "postgres"), and runs in that server's cells only.

#include <memory>
#include <thread>

#include "conformance/conformance_helpers.hpp"

using namespace dblock;
using namespace dblock::conformance;

namespace {

void idle_timeouts_do_not_drop_a_held_lock() {
  const std::string key = test::unique_key("idle");
  std::unique_ptr<Db> db;
  std::unique_ptr<Locker> a;
  test::with_short_idle_timeouts([&](const std::string& dsn) {
    db = std::make_unique<Db>(dsn, 1000);
    a = db->locker();  // connections opened while the server ends idle sessions after 1-2 s
    acquire(*a, request(key, "owner-a"));
  });
  std::this_thread::sleep_for(4s);
  auto renewed = a->renew(30s);
  CHECK_MESSAGE(renewed.has_value(), (renewed ? std::string() : renewed.error().message));
  CHECK(db->status(key).state == LockStatus::State::held);
  auto b = db->locker();
  CHECK(attempt(*b, request(key, "owner-b")).state == AcquireOutcome::State::busy);
  release(*a);
}

}  // namespace

TEST_CASE("mysql: a server wait_timeout of 2 s does not drop a held lock over 4 s" * doctest::test_suite("mysql")) {
  idle_timeouts_do_not_drop_a_held_lock();
}

TEST_CASE("postgres: idle timeouts of 1 s on the server do not drop a held lock over 4 s" *
          doctest::test_suite("postgres")) {
  idle_timeouts_do_not_drop_a_held_lock();
}

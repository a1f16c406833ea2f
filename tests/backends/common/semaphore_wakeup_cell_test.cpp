// A semaphore waiter's wakeup descriptor (docs/backend-contract.md, "Semaphores": wake-ups) fires
// on the release of any slot it tried. Only the backends whose lease waiter has a descriptor
// (SQLite's wake words, PostgreSQL's LISTEN) can be checked; on the others core polls with
// backoff. So the one body is registered in the suites of the cells that have one, and there a
// missing descriptor fails the case instead of ending it early.

#include <poll.h>

#include "conformance/conformance_helpers.hpp"
#include "core/semaphore.hpp"

using namespace dblock;
using namespace dblock::conformance;

namespace {

LockRequest slot_request(const std::string& key, const std::string& owner) {
  LockRequest req = request(key, owner);
  req.slots = 2;
  return req;
}

void a_waiters_wakeup_descriptor_turns_readable() {
  Db db;
  const std::string key = test::unique_key("sem-wake");
  auto a = make_semaphore_locker(db.locker(), 2), b = make_semaphore_locker(db.locker(), 2);
  // The waiter is another process: its own backend (a lease locker shares its backend's
  // connection, which would read the release's notification as part of the release).
  auto other = test::open(db.options);
  auto made = other->make_locker(test::strategy());
  REQUIRE(made.has_value());
  auto c = make_semaphore_locker(std::move(*made), 2);
  acquire(*a, slot_request(key, "owner-a"));
  acquire(*b, slot_request(key, "owner-b"));
  REQUIRE(waiting_attempt(*c, slot_request(key, "owner-c")).state == AcquireOutcome::State::busy);
  const int fd = c->wakeup_fd();
  REQUIRE(fd >= 0);
  c->consume_wakeup();
  // Slot 0 is the first one the waiter tried, not the last.
  release(*a);
  pollfd p{fd, POLLIN, 0};
  CHECK(::poll(&p, 1, 5000) == 1);  // generous: a loaded machine
  c->consume_wakeup();
  AcquireOutcome got = attempt(*c, slot_request(key, "owner-c"));
  CHECK(got.state == AcquireOutcome::State::acquired);
  CHECK(got.slot == 0);
  release(*b);
  if (got.state == AcquireOutcome::State::acquired) release(*c);
}

}  // namespace

TEST_CASE("semaphore: a waiter's wakeup descriptor turns readable when any slot it tried is released" *
          doctest::test_suite("sqlite")) {
  a_waiters_wakeup_descriptor_turns_readable();
}

TEST_CASE("semaphore: a waiter's wakeup descriptor turns readable when any slot it tried is released" *
          doctest::test_suite("postgres.lease")) {
  a_waiters_wakeup_descriptor_turns_readable();
}

// The lease locker (src/core/sql/lease_locker.cpp) on a scripted session: which
// statements a waiter runs while a holder keeps refusing it, with the failover gate folded
// into the take (FailoverStatements::folded, PostgreSQL's shape), and with a take that says
// why it refused (LeaseStatements::take_explains).

#include <doctest/doctest.h>

#include <memory>

#include "core/sql/lease_locker.hpp"
#include "support/scripted_session.hpp"

using namespace dblock;

namespace {

// Every take refused (a holder); the failover record names the server's own incarnation with
// a TTL of an hour; the refusal finds no row (busy, nobody named). With `explain`, the take
// answers with the refusal's row.
std::shared_ptr<testing::ScriptedSession> refusing_session(bool explain = false) {
  auto session = std::make_shared<testing::ScriptedSession>();
  if (explain)
    // Not taken: three NULLs, then the refusal's columns: web2's live lease, token 7.
    session->answers["lease.take"] =
        testing::row_of({std::nullopt, std::nullopt, std::nullopt, "k", "web2:9", "web2", "9", "7", "lease", "1000",
                         "1000", "31000", std::nullopt, "1000", std::nullopt, std::nullopt, "2000", "1", std::nullopt},
                        1);
  session->answers["failover.read"] =
      testing::row_of({"server-1", "server-1", std::nullopt, "0", std::nullopt, "0", "3600000"});
  return session;
}

sql::LeaseStatements folded_statements() {
  sql::LeaseStatements st;
  st.take = {"lease.take", "take"};
  st.refusal = {"lease.refusal", "refusal"};
  st.failover.read = {"failover.read", "read"};
  st.failover.create = {"failover.create", "create"};
  st.failover.max_token = {"failover.max_token", "max_token"};
  st.failover.move = {"failover.move", "move"};
  st.failover.raise_ttl = {"failover.raise_ttl", "raise_ttl"};
  st.failover.folded = true;
  return st;
}


}  // namespace

TEST_CASE("a lease waiter refused again and again reads the failover record once") {
  auto session = refusing_session();
  auto locker = sql::make_lease_locker(session, folded_statements(), "dblock_", 10);
  const LockRequest req = testing::lock_request(Millis(30000));
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto out = locker->try_acquire(req, Millis(0));
    REQUIRE(out);
    CHECK(out->state == AcquireOutcome::State::busy);
  }
  CHECK(session->runs["lease.take"] == 5);
  CHECK(session->runs["lease.refusal"] == 5);
  CHECK(session->runs["failover.read"] == 1);
  CHECK(session->runs["failover.raise_ttl"] == 0);
}

TEST_CASE("a lease waiter asks the failover record again for a TTL longer than it was asked for") {
  auto session = refusing_session();
  auto locker = sql::make_lease_locker(session, folded_statements(), "dblock_", 10);
  LockRequest req = testing::lock_request(Millis(30000));
  REQUIRE(locker->try_acquire(req, Millis(0)));
  req.ttl = Millis(60000);
  REQUIRE(locker->try_acquire(req, Millis(0)));
  REQUIRE(locker->try_acquire(req, Millis(0)));
  CHECK(session->runs["failover.read"] == 2);
}

TEST_CASE("a lease take that explains its refusal runs no refusal statement") {
  auto session = refusing_session(true);
  sql::LeaseStatements st = folded_statements();
  st.take_explains = true;
  auto locker = sql::make_lease_locker(session, st, "dblock_", 10);
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto out = locker->try_acquire(testing::lock_request(Millis(30000)), Millis(0));
    REQUIRE(out);
    CHECK(out->state == AcquireOutcome::State::busy);
    REQUIRE(out->holder);
    CHECK(out->holder->owner == "web2:9");
    CHECK(out->holder->token == 7);
    CHECK(out->holder->state == LockStatus::State::held);
  }
  CHECK(session->runs["lease.take"] == 3);
  CHECK(session->runs["lease.refusal"] == 0);
  CHECK(session->runs["failover.read"] == 1);
}

TEST_CASE("a lease waiter whose wait for a release lost the connection reconnects and reads the failover record again") {
  auto session = refusing_session();
  auto locker = sql::make_lease_locker(session, folded_statements(), "dblock_", 10);
  REQUIRE(locker->try_acquire(testing::lock_request(Millis(30000)), Millis(0)));
  CHECK(session->runs["failover.read"] == 1);
  session->drop_waits = true;
  auto out = locker->try_acquire(testing::lock_request(Millis(30000)), Millis(1000));
  REQUIRE_FALSE(out);
  CHECK(out.error().kind == ErrorKind::connection);
  // The locker reconnects (not the signal behind its back), and the new connection may reach
  // another server: its gate is read again there.
  CHECK(session->reconnects == 1);
  session->drop_waits = false;
  REQUIRE(locker->try_acquire(testing::lock_request(Millis(30000)), Millis(0)));
  CHECK(session->runs["failover.read"] == 2);
}

namespace {

// A holder's lease (token 5) whose release commits but loses its reply (the connection broke:
// a read timeout on a loaded server); on the new connection the row is ours and released.
std::shared_ptr<testing::ScriptedSession> session_losing_the_release_reply() {
  auto session = std::make_shared<testing::ScriptedSession>();
  session->answers["lease.take"] = testing::row_of({"5", "1000", "4000"}, 1);
  session->answers["lease.refusal"] = testing::row_of({"k", "me", "h", "1", "5", "lease", "1000", "1000", "2000", "2000",
                                                       "1000", std::nullopt, std::nullopt, "2000", "0", std::nullopt});
  session->lose_first_reply = {"lease.release"};
  return session;
}

sql::LeaseStatements plain_statements() {
  sql::LeaseStatements st;
  st.take = {"lease.take", "take"};
  st.refusal = {"lease.refusal", "refusal"};
  st.release = {"lease.release", "release"};
  return st;
}

}  // namespace

TEST_CASE("a lease release whose reply was lost after it committed is not run again, and is no loss") {
  auto session = session_losing_the_release_reply();
  auto locker = sql::make_lease_locker(session, plain_statements(), "dblock_", 10);
  auto got = locker->try_acquire(testing::lock_request(Millis(3000)), Millis(0));
  REQUIRE(got);
  REQUIRE(got->state == AcquireOutcome::State::acquired);
  auto released = locker->release(ReleaseRequest{});
  CHECK(released);
  CHECK(session->reconnects == 1);
  CHECK(session->runs["lease.release"] == 1);  // not again: it had committed
  CHECK(session->runs["lease.refusal"] == 1);
}

// The lease locker (src/core/sql/lease_locker.cpp) on a scripted session: which
// statements a waiter runs while a holder keeps refusing it, with a take that reads the failover
// gate itself (it binds :record: PostgreSQL's shape), and with a take whose answer says why it
// refused (LeaseStatements::take), and one whose answer is the row it left (MariaDB's shape).

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
      testing::row_of({"server-1", "server-1", std::nullopt, "0", std::nullopt, "0", "3600000", "1", "0", "1"});
  return session;
}

sql::LeaseStatements folded_statements() {
  sql::LeaseStatements st;
  st.take = {"lease.take", "take, reading the gate of :record"};
  st.refusal = {"lease.refusal", "refusal"};
  st.failover = testing::failover_statements();
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
  // The first refusal is asked again once the record has been read (another process may have
  // covered the TTL meanwhile: then it was the gate's); the later ones are not.
  CHECK(session->runs["lease.take"] == 6);
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

namespace {

// Three attempts without a wait on a take that reads the gate itself, each refused.
std::vector<AcquireOutcome> three_refusals(const std::shared_ptr<testing::ScriptedSession>& session) {
  sql::LeaseStatements st = folded_statements();
  auto locker = sql::make_lease_locker(session, st, "dblock_", 10);
  std::vector<AcquireOutcome> outs;
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto out = locker->try_acquire(testing::lock_request(Millis(30000)), Millis(0));
    REQUIRE(out);
    CHECK(out->state == AcquireOutcome::State::busy);
    outs.push_back(*out);
  }
  return outs;
}

}  // namespace

TEST_CASE("a lease take that explains its refusal runs no refusal statement") {
  auto session = refusing_session(true);
  for (const AcquireOutcome& out : three_refusals(session)) {
    REQUIRE(out.holder);
    CHECK(out.holder->owner == "web2:9");
    CHECK(out.holder->token == 7);
    CHECK(out.holder->state == LockStatus::State::held);
  }
  CHECK(session->runs["lease.take"] == 3);
  CHECK(session->runs["lease.refusal"] == 0);
  // Refused by a live holder, which the gate could only confirm: a contender without -w pays
  // one statement.
  CHECK(session->runs["failover.read"] == 0);
}

TEST_CASE("a lease take refused with nothing in its way asks the failover gate why, once") {
  auto session = refusing_session();
  // Not taken, and no row to explain it (the gate refused, or the row went in between).
  session->answers["lease.take"] = testing::row_of(std::vector<sql::Rows::Cell>(19), 1);
  three_refusals(session);
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

namespace {

// What a lease's release sends (' | ' between two) once the take has held the key, with the history row asked for.
std::string release_sent(bool tells) {
  auto session = std::make_shared<testing::ScriptedSession>();
  session->answers["lease.take"] = testing::row_of({"5", "1000", "4000"}, 1);
  session->answers["lease.release"] = testing::row_of({}, 1);
  sql::LeaseStatements st = plain_statements();
  st.begin_release = "BEGIN RELEASE";
  st.history.add = {"history.add", "add"};
  st.history.oldest = {"history.oldest", "oldest"};
  session->answers["history.oldest"] = testing::row_of({"5"});  // the key's only row: no trim due
  // A release that binds :channel tells the waiters itself, and commits alone (release_tells).
  st.release = {"lease.release", tells ? "UPDATE release WHERE :channel = :channel" : "UPDATE release"};
  auto locker = sql::make_lease_locker(session, st, "dblock_", 100);
  REQUIRE(locker->try_acquire(testing::lock_request(Millis(3000)), Millis(0)));
  session->sent.clear();
  ReleaseRequest req;
  req.finished_run = true;
  req.exit_code = 0;
  req.history = RunRecord{};
  CHECK(locker->release(req));
  std::string sent;
  for (const auto& s : session->sent) sent += (sent.empty() ? "" : " | ") + s;
  return sent;
}

}  // namespace

TEST_CASE("a lease release that commits alone wakes its waiters before the run's history row is written") {
  // PostgreSQL's shape: the release alone (its NOTIFY goes out at its own commit), then the row.
  CHECK(release_sent(true) == "lease.release | BEGIN RELEASE | history.add | history.oldest | COMMIT");
  // SQLite's and MySQL's: one transaction (a commit of the release's own would wait for the disk).
  CHECK(release_sent(false) == "BEGIN RELEASE | lease.release | history.add | history.oldest | COMMIT");
}

// A failover the holder's grant survived (issue 50): the lock-delay starts at the first contact
// with the new incarnation, the holder's renewal or a waiter the holder refuses, not when the
// holder lets go, so it ends one TTL after the promotion was first seen.
namespace {

// The record as the new primary has it: it names the old one ("server-0"), the server is
// "server-1"; read again after the move, it names server-1 and a lock-delay until 61000 (the
// database's clock at 1000).
void record_of_the_old_primary(testing::ScriptedSession& s) {
  s.in_turn["failover.read"] = {
      testing::row_of({"server-0", "server-1", std::nullopt, "10", std::nullopt, "1000", "60000", "0", "0", "1"}),
      testing::row_of({"server-1", "server-1", "server-0", "1048586", "61000", "1000", "60000", "1", "1", "1"})};
  s.answers["failover.max_token"] = testing::row_of({"7"});
  s.answers["failover.move"] = testing::row_of({}, 1);
}

// A lease held (token 5) on `session` with `st`.
std::unique_ptr<Locker> holding(const std::shared_ptr<testing::ScriptedSession>& session, const sql::LeaseStatements& st) {
  session->answers["lease.take"] = testing::row_of({"5", "1000", "31000"}, 1);
  auto locker = sql::make_lease_locker(session, st, "dblock_", 10);
  auto got = locker->try_acquire(testing::lock_request(Millis(30000)), Millis(0));
  REQUIRE(got);
  REQUIRE(got->state == AcquireOutcome::State::acquired);
  return locker;
}

}  // namespace

TEST_CASE("a lease holder's renewal that finds another incarnation recorded starts the lock-delay, and renews on") {
  auto session = std::make_shared<testing::ScriptedSession>();
  sql::LeaseStatements st = folded_statements();
  st.renew = {"lease.renew", "renew"};
  auto locker = holding(session, st);
  // The same server: the renewal says so, nothing more is read.
  session->answers["lease.renew"] = testing::row_of({"0"}, 1);
  CHECK(locker->renew(Millis(30000)));
  CHECK(session->runs["failover.read"] == 0);
  // A new primary that has the grant: the renewal succeeds and the record is moved.
  session->answers["lease.renew"] = testing::row_of({"1"}, 1);
  record_of_the_old_primary(*session);
  CHECK(locker->renew(Millis(30000)));
  CHECK(session->runs["failover.move"] == 1);
  CHECK(session->runs["failover.max_token"] == 1);
}

TEST_CASE("a lease holder whose renewal cannot tell reads the failover record once its connection was made again") {
  auto session = std::make_shared<testing::ScriptedSession>();
  sql::LeaseStatements st = folded_statements();
  st.take = {"lease.take", "take above :fence"};  // MySQL's shape: the gate admitted before it
  st.renew = {"lease.renew", "renew"};
  session->answers["failover.read"] =
      testing::row_of({"server-0", "server-0", std::nullopt, "0", std::nullopt, "0", "3600000", "1", "0", "1"});
  auto locker = holding(session, st);
  const int reads_at_take = session->runs["failover.read"];
  session->answers["lease.renew"] = testing::row_of({}, 1);
  CHECK(locker->renew(Millis(30000)));
  CHECK(session->runs["failover.read"] == reads_at_take);  // the connection's server is known
  session->lose_first_reply = {"lease.renew"};
  session->runs["lease.renew"] = 0;  // the next one is the first to lose its reply
  record_of_the_old_primary(*session);
  CHECK(locker->renew(Millis(30000)));  // lost, reconnected, read the record, renewed
  CHECK(session->reconnects == 1);
  CHECK(session->runs["failover.move"] == 1);
}

TEST_CASE("a lease waiter refused by a live holder on a new incarnation starts the lock-delay") {
  auto session = refusing_session(true);
  sql::Rows refused = session->answers["lease.take"];
  // The take's last column: the record names another server.
  std::vector<sql::Rows::Cell> cells;
  for (int c = 0; c < refused[0].columns(); ++c)
    cells.push_back(refused[0].is_null(c) ? sql::Rows::Cell() : sql::Rows::Cell(refused[0].text(c)));
  cells.emplace_back("1");
  session->answers["lease.take"] = testing::row_of(std::move(cells), 1);
  record_of_the_old_primary(*session);
  auto locker = sql::make_lease_locker(session, folded_statements(), "dblock_", 10);
  auto out = locker->try_acquire(testing::lock_request(Millis(30000)), Millis(0));
  REQUIRE(out);
  CHECK(out->state == AcquireOutcome::State::busy);
  REQUIRE(out->lock_delay);
  CHECK(out->lock_delay->until_ms == 61000);
  CHECK(session->runs["failover.move"] == 1);
}

namespace {

// A wake primitive that hands a key over with the take's :hand (PostgreSQL's handoff lock,
// ListenWake): it notes each hook core calls, in order with the statements run.
class HandingWake final : public sql::Wake {
 public:
  explicit HandingWake(std::vector<std::string>& sent) : sent_(&sent) {}
  void taking(const std::string& key, sql::Params& take, bool) override {
    sent_->push_back("taking " + key);
    take.set("hand", std::int64_t{42});
  }
  void took(const std::string& key, const sql::Rows& took) override {
    sent_->push_back("took " + key + " " + took[0].text(0));
  }
  void releasing(const std::string& key) override { sent_->push_back("releasing " + key); }

 private:
  std::vector<std::string>* sent_;
};

}  // namespace

TEST_CASE("core tells the wake primitive of every lease take and release, right before it runs them, and what the "
          "take answered") {
  auto session = std::make_shared<testing::ScriptedSession>();
  session->wake_with(std::make_unique<HandingWake>(session->sent));
  session->answers["lease.take"] = testing::row_of({"5", "1000", "4000"}, 1);
  session->answers["lease.release"] = testing::row_of({}, 1);
  sql::LeaseStatements st = plain_statements();
  st.begin_release = "BEGIN RELEASE";
  auto locker = sql::make_lease_locker(session, st, "dblock_", 10);
  REQUIRE(locker->try_acquire(testing::lock_request(Millis(3000)), Millis(0)));
  // What the primitive added goes with the take (the backend runs it as any statement).
  const sql::Value* hand = session->last_params["lease.take"].find("hand");
  REQUIRE(hand);
  CHECK(std::get<std::int64_t>(*hand) == 42);
  CHECK(locker->release(ReleaseRequest{}));
  std::string sent;
  for (const auto& s : session->sent) sent += (sent.empty() ? "" : " | ") + s;
  CHECK(sent == "taking k | lease.take | took k 5 | BEGIN RELEASE | releasing k | lease.release | COMMIT");
}

namespace {

// HandingWake's primitive at the head of the key's waiters: its takes may wait ahead.
class HeadWake final : public sql::Wake {
 public:
  explicit HeadWake(std::vector<std::string>& sent) : sent_(&sent) {}
  bool at_head(const std::string&) const override { return true; }
  Result<bool> join(const std::string&, Millis) override { return true; }
  const sql::Statement* wait_ahead(const std::string& key, Millis, sql::Params& wait) override {
    wait.set("key", key);
    return &wait_;
  }
  void taking(const std::string& key, sql::Params&, bool behind) override {
    sent_->push_back("taking " + key + (behind ? " behind" : " alone"));
  }
  void let_in_without(const std::string& key) override { sent_->push_back("let_in_without " + key); }

 private:
  std::vector<std::string>* sent_;
  const sql::Statement wait_{"wake.wait_ahead", "SELECT 1"};
};

std::string joined(const std::vector<std::string>& sent) {
  std::string out;
  for (const auto& s : sent) out += (out.empty() ? "" : " | ") + s;
  return out;
}

}  // namespace

TEST_CASE("at the head of the key's waiters core sends the lease take behind the wake's wait, one round trip; a take "
          "let in without the row gives the wait's lock back, and once the wait heard no wake the next goes alone") {
  auto session = std::make_shared<testing::ScriptedSession>();
  session->wake_with(std::make_unique<HeadWake>(session->sent));
  const sql::Rows refused = testing::row_of({std::nullopt, std::nullopt, std::nullopt}, 0);
  session->in_turn["lease.take"] = {refused, refused, testing::row_of({"5", "1000", "4000"}, 1)};
  session->answers["lease.refusal"] = testing::row_of({"k", "other", "h", "2", "4", "lease", "1000", "1000", "9000",
                                                       "2000", "1000", std::nullopt, std::nullopt, "2000", "1",
                                                       std::nullopt});
  auto locker = sql::make_lease_locker(session, plain_statements(), "dblock_", 10);
  auto out = locker->try_acquire(testing::lock_request(Millis(3000)), Millis(1000));
  REQUIRE(out);
  CHECK(out->state == AcquireOutcome::State::busy);
  // Taking its place is a wake (the head may wait ahead again); waiting heard none.
  CHECK(joined(session->sent) ==
        "taking k behind | wake.wait_ahead ahead | lease.take | let_in_without k | lease.refusal | "
        "taking k behind | wake.wait_ahead ahead | lease.take | let_in_without k | lease.refusal");
  session->sent.clear();
  out = locker->try_acquire(testing::lock_request(Millis(3000)), Millis(1000));
  REQUIRE(out);
  CHECK(out->state == AcquireOutcome::State::acquired);
  CHECK(joined(session->sent) == "taking k alone | lease.take");
}

TEST_CASE("a lease take that answers with the row it left has the taken row's times in its own columns") {
  auto session = refusing_session();
  // Taken, token 8, acquired at 5000, expiring at 35000 (MariaDB's RETURNING answers them where
  // it took the row), then the row as the take left it, then the wake primitive's two.
  session->answers["lease.take"] =
      testing::row_of({"8", "5000", "35000", "k", "me:1", "me", "1", "8", "lease", "5000", "5000", "35000",
                       std::nullopt, "5000", std::nullopt, std::nullopt, "5000", "1", std::nullopt, std::nullopt,
                       std::nullopt},
                      1);
  auto locker = sql::make_lease_locker(session, folded_statements(), "dblock_", 10);
  auto out = locker->try_acquire(testing::lock_request(Millis(30000)), Millis(0));
  REQUIRE(out);
  CHECK(out->state == AcquireOutcome::State::acquired);
  CHECK(out->token == 8);
  CHECK(out->acquired_at_ms == std::optional<std::int64_t>(5000));
  CHECK(out->expires_at_ms == std::optional<std::int64_t>(35000));
}

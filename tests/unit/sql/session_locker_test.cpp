// The session locker (src/core/sql/session_locker.cpp) on a scripted bookkeeping session and a
// scripted holder session: what a release reports when its row statement's reply was lost, and
// what the server lock's take leaves behind.

#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/sql/pooler.hpp"
#include "core/sql/session_locker.hpp"
#include "support/scripted_session.hpp"

using namespace dblock;

namespace {

// A holder session answering from a scripted session, its transaction opened by BEGIN and
// ended by ROLLBACK (or a ROLLBACK sent ahead, noted "ROLLBACK ahead"). A statement of
// `wait_ends` fails as a lock wait that ran out (a slice's end), so many times.
class ScriptedHolder final : public sql::HolderSession {
 public:
  Result<sql::Rows> run(const sql::Statement& st, const sql::Params& p, Millis) override {
    if (auto it = wait_ends.find(st.id); it != wait_ends.end() && it->second > 0) {
      --it->second;
      ++session.runs[st.id];
      return fail(ErrorKind::wait_ended, "lock_timeout");
    }
    return session.run(st, p);
  }
  Result<void> send_numbering(const sql::Statement& st, const sql::Params& p, Millis wait, const sql::Statement&,
                              const sql::Params& np, bool before_tag) override {
    ++numberings;
    numbering_params = np;
    numbered_before_tag += before_tag ? 1 : 0;
    return before_tag ? send_before_tag(st, p, wait) : send(st, p, wait);
  }
  std::optional<Result<sql::Rows>> numbered() override { return std::exchange(numbered_answer, std::nullopt); }
  std::chrono::microseconds handshake() const override { return handshake_took; }
  std::optional<sql::Rows> refusal_read() override { return std::exchange(refusal_answer, std::nullopt); }
  void send_behind(const sql::Statement& ahead, const sql::Params&) override { behind.push_back(ahead.id); }
  Result<void> exec(std::string_view sql) override {
    execs.emplace_back(sql);
    open = sql == "BEGIN";
    return {};
  }
  Result<void> rollback_ahead() override {
    execs.emplace_back("ROLLBACK ahead");
    open = false;
    if (fail_rollback) return fail(ErrorKind::connection, "the ROLLBACK failed");
    return {};
  }
  Result<void> begin(const sql::LockStatements& st, const sql::Params& p, Millis) override {
    (void)exec(st.begin);
    if (auto r = session.run(st.lock_wait, p); !r) return std::unexpected(r.error());
    return {};
  }
  void close() override {
    ++closes;
    open = false;
  }
  Result<void> reopen() override {
    ++reopens;
    return {};
  }
  bool transaction_open() const override { return open; }
  std::string session_id() const override { return "1"; }
  int socket() const override { return 0; }  // open
  Millis server_wait(Millis wait, bool) const override { return wait; }
  void bind(sql::Params&, const std::string&, Millis) const override {}
  sql::Waiters& release_signal() override {
    if (wake) signal_ = sql::Waiters(std::move(wake));
    return signal_;
  }

  testing::ScriptedSession session;
  std::vector<std::string> execs;
  bool open = false;
  std::map<std::string, int> wait_ends;  // by statement id
  bool fail_rollback = false;            // rollback_ahead fails
  int closes = 0, reopens = 0;
  int numberings = 0;  // lock statements sent with a numbering (send_numbering)
  int numbered_before_tag = 0;  // of them, txn-insert's INSERT ahead of its tag
  sql::Params numbering_params;  // the last numbering's
  std::optional<Result<sql::Rows>> numbered_answer;  // what numbered() answers next
  std::chrono::microseconds handshake_took{0};  // handshake()
  std::optional<sql::Rows> refusal_answer;  // what refusal_read() answers next
  std::vector<std::string> behind;  // the waits lock statements were sent behind (send_behind)
  std::unique_ptr<sql::Wake> wake;  // the queue of release_signal(), when set before the first take

 private:
  sql::Waiters signal_;
};

sql::LockStatements lock_statements() {
  sql::LockStatements st;
  st.advisory_wait = {"lock.advisory_wait", "take"};
  st.advisory_give_back = {"lock.advisory_give_back", "give back"};
  st.begin = "BEGIN";
  st.lock_wait = {"lock.wait", "wait"};
  st.lock_claim = {"lock.claim", "lock or wait"};
  st.lock_claim_nowait = {"lock.claim_nowait", "lock"};
  st.make_claim = {"lock.make_claim", "make"};
  st.insert_claim = {"lock.insert_claim", "insert"};
  return st;
}

sql::LeaseStatements statements() {
  sql::LeaseStatements st;
  st.session_take = {"session.take", "take"};
  st.refusal = {"lease.refusal", "why"};
  st.release = {"lease.release", "release"};
  return st;
}

// statements() with the failover record's statements.
sql::LeaseStatements with_failover() {
  sql::LeaseStatements st = statements();
  st.failover = testing::failover_statements();
  return st;
}

// A holder whose advisory lock is taken and given back as this session's (`ours`).
std::unique_ptr<ScriptedHolder> advisory_holder(bool ours) {
  auto holder = std::make_unique<ScriptedHolder>();
  holder->session.answers["lock.advisory_wait"] = testing::row_of({"1"});
  holder->session.answers["lock.advisory_give_back"] = testing::row_of({ours ? "1" : "0"});
  return holder;
}

// The row numbered with token 5; the release's first try runs but its reply is lost (the
// connection broke: an I/O timeout on a loaded server), so with_retry runs it again on a new
// connection, where the row is already released: affected 0.
std::shared_ptr<testing::ScriptedSession> book_losing_the_release_reply() {
  auto book = std::make_shared<testing::ScriptedSession>();
  book->answers["session.take"] = testing::row_of({"5", "1000", std::nullopt}, 1);
  book->lose_first_reply = {"lease.release"};
  return book;
}

std::unique_ptr<Locker> locker(Strategy strategy, std::unique_ptr<ScriptedHolder> holder,
                               std::shared_ptr<testing::ScriptedSession> book) {
  return sql::make_session_locker(strategy, std::move(holder), lock_statements(), std::move(book), statements(),
                                  "dblock_", 10);
}

}  // namespace

TEST_CASE("a session release whose reply was lost, with the server lock held to the end, is no loss") {
  auto book = book_losing_the_release_reply();
  auto l = locker(Strategy::advisory, advisory_holder(true), book);
  auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(0));
  REQUIRE(got);
  REQUIRE(got->state == AcquireOutcome::State::acquired);
  CHECK(got->token == 5);
  auto released = l->release(ReleaseRequest{});
  CHECK(book->runs["lease.release"] == 2);
  CHECK(book->reconnects == 1);
  CHECK(released);
}

TEST_CASE("a session release whose server lock was gone is a loss, whatever the row said") {
  auto book = book_losing_the_release_reply();
  auto l = locker(Strategy::advisory, advisory_holder(false), book);
  REQUIRE(l->try_acquire(testing::lock_request(Millis(3000)), Millis(0)));
  auto released = l->release(ReleaseRequest{});
  REQUIRE_FALSE(released);
  CHECK(released.error().kind == ErrorKind::lost);
}

TEST_CASE("a for-update take that finds no claims row inserts it, committed, and locks it again") {
  auto holder = std::make_unique<ScriptedHolder>();
  holder->session.in_turn["lock.claim_nowait"] = {sql::Rows{}};
  holder->session.answers["lock.claim_nowait"] = testing::row_of({"1"}, 1);
  ScriptedHolder& h = *holder;
  auto l = locker(Strategy::for_update, std::move(holder), book_losing_the_release_reply());
  auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(0));
  REQUIRE(got);
  CHECK(got->state == AcquireOutcome::State::acquired);
  CHECK(h.session.runs["lock.claim_nowait"] == 2);
  CHECK(h.session.runs["lock.make_claim"] == 1);
  CHECK(h.execs == std::vector<std::string>{"BEGIN", "ROLLBACK", "BEGIN"});
  CHECK(h.open);  // the lock's transaction, held
}

TEST_CASE("a txn-insert take that finds the key taken holds nothing; its ROLLBACK goes before the next BEGIN") {
  auto holder = std::make_unique<ScriptedHolder>();  // insert_claim inserts nothing
  ScriptedHolder& h = *holder;
  auto book = book_losing_the_release_reply();
  auto l = locker(Strategy::txn_insert, std::move(holder), book);
  auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(0));
  REQUIRE(got);
  CHECK(got->state == AcquireOutcome::State::busy);
  // No holder in the row to show (a competitor between its lock and its row, or a table just
  // made): asked once more. A refused try's transaction holds nothing, so its ROLLBACK is not
  // waited for (a contender that ends closes the connection): it goes ahead of the next BEGIN.
  CHECK(h.session.runs["lock.insert_claim"] == 2);
  CHECK(h.execs == std::vector<std::string>{"BEGIN", "ROLLBACK ahead", "BEGIN"});
  CHECK(h.open);  // the last try's, owed
  CHECK(book->runs["session.take"] == 0);
  got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(0));
  REQUIRE(got);
  CHECK(got->state == AcquireOutcome::State::busy);
  CHECK(h.execs == std::vector<std::string>{"BEGIN", "ROLLBACK ahead", "BEGIN", "ROLLBACK ahead", "BEGIN",
                                            "ROLLBACK ahead", "BEGIN"});
}

namespace {

// A for-update waiter whose first `ends` lock statements end with their slice (lock_timeout),
// then lock; its book numbers the row with token 5 and releases it.
struct Slicing {
  ScriptedHolder* h;
  std::unique_ptr<Locker> l;
};
Slicing slicing(int ends) {
  auto book = std::make_shared<testing::ScriptedSession>();
  auto holder = std::make_unique<ScriptedHolder>();
  ScriptedHolder* h = holder.get();
  h->wait_ends["lock.claim"] = ends;
  h->session.answers["lock.claim"] = testing::row_of({"1"}, 1);
  book->answers["session.take"] = testing::row_of({"5", "1000", std::nullopt}, 1);
  book->answers["lease.release"] = testing::row_of({}, 1);
  return {h, locker(Strategy::for_update, std::move(holder), std::move(book))};
}

}  // namespace

TEST_CASE("a waiter's slice that ends without the lock owes its ROLLBACK, sent ahead of the next slice's BEGIN") {
  // Awaited, it was a round trip between two slices in which a release found nobody waiting.
  auto [hp, l] = slicing(2);
  ScriptedHolder& h = *hp;
  for (int slice = 0; slice < 2; ++slice) {
    auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(500));
    REQUIRE(got);
    CHECK(got->state == AcquireOutcome::State::busy);
    CHECK(h.open);  // aborted, its ROLLBACK owed
  }
  auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(500));
  REQUIRE(got);
  CHECK(got->state == AcquireOutcome::State::acquired);
  CHECK(h.execs == std::vector<std::string>{"BEGIN", "ROLLBACK ahead", "BEGIN", "ROLLBACK ahead", "BEGIN"});
  CHECK(h.session.runs["lock.claim"] == 3);
  CHECK(l->release(ReleaseRequest{}));
}

namespace {

// A for-update waiter whose dialect can chain its numbering (LockStatements::row_numbered): its
// bookkeeping session answers lock.alive after `alive`, numbers the row with token 5 and
// releases it; the holder's lock statements are scripted by the caller (`script`).
struct Chaining {
  std::shared_ptr<testing::ScriptedSession> book;
  ScriptedHolder* h;
  std::unique_ptr<Locker> l;
};
Chaining chaining(Millis alive, const std::function<void(ScriptedHolder&)>& script) {
  auto book = std::make_shared<testing::ScriptedSession>();
  book->answers["session.take"] = testing::row_of({"5", "1000", std::nullopt}, 1);
  book->answers["lease.release"] = testing::row_of({}, 1);
  book->takes["lock.alive"] = alive;
  auto holder = std::make_unique<ScriptedHolder>();
  ScriptedHolder* h = holder.get();
  script(*h);
  sql::LockStatements st = lock_statements();
  st.row_numbered = {"lock.row_numbered", "number if held"};
  st.alive = {"lock.alive", "SELECT 1"};
  return {book, h, sql::make_session_locker(Strategy::for_update, std::move(holder), st, book, statements(), "dblock_", 10)};
}

}  // namespace

TEST_CASE("a row-lock waiter's numbering goes with its lock statement only where a round trip takes 1 ms or more") {
  // On loopback its proof (the server's lock table read) costs more than the round trip it
  // saves: 100 waiters handed off 0.82-0.95x as fast chained.
  for (const Millis distance : {Millis(0), Millis(3)}) {
    CAPTURE(distance.count());
    auto [book, hp, l] = chaining(distance, [](ScriptedHolder& x) {
      x.wait_ends["lock.claim"] = 2;
      x.session.answers["lock.claim"] = testing::row_of({"1"}, 1);
    });
    ScriptedHolder& h = *hp;
    for (int slice = 0; slice < 2; ++slice) {
      auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(500));
      REQUIRE(got);
      CHECK(got->state == AcquireOutcome::State::busy);
    }
    auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(500));
    REQUIRE(got);
    CHECK(got->state == AcquireOutcome::State::acquired);
    CHECK(got->token == 5);
    // Timed when the first attempt's try without waiting found the key busy, and once more
    // after the first wait: near, one answer quicker than 1 ms ends it; far, the quickest of
    // three is 3 ms, and every lock statement that waits carries the numbering.
    CHECK(book->runs["lock.alive"] == (distance.count() > 0 ? 6 : 2));
    CHECK(h.numberings == (distance.count() > 0 ? 3 : 0));
    CHECK(std::count(book->prepared.begin(), book->prepared.end(), "lock.row_numbered") == (distance.count() > 0 ? 1 : 0));
    CHECK(l->release(ReleaseRequest{}));
  }
}

// MariaDB's shape: a holder tag after txn-insert's INSERT, and a session.take that reads the
// failover gate itself, as its row-lock numbering (lock.row_numbered) does.
// `grant_wait`: the dialect gives lock.grant_wait, a first attempt's numbering's wait for its
// proof (MariaDB's).
std::unique_ptr<Locker> gated_locker(Strategy strategy, std::unique_ptr<ScriptedHolder> holder,
                                     std::shared_ptr<testing::ScriptedSession> book, bool grant_wait = false) {
  sql::LockStatements st = lock_statements();
  if (grant_wait) st.grant_wait = {"lock.grant_wait", "wait for the proof within :poll_ms"};
  st.tag = {"lock.tag", "tag"};
  st.untag = {"lock.untag", "untag"};
  st.row_numbered = {"lock.row_numbered", "number if held, gate :record"};
  st.alive = {"lock.alive", "SELECT 1"};
  sql::LeaseStatements lease = with_failover();
  lease.session_take = {"session.take", "take, gate :record"};
  return sql::make_session_locker(strategy, std::move(holder), st, std::move(book), lease, "dblock_", 10);
}

namespace {

// A waiters' queue whose every waiter is at the head and offers the wait for the holder's handoff
// (Wake::wait_ahead), as MariaDB's named-lock queue does.
class HeadWake final : public sql::Wake {
 public:
  bool at_head(const std::string&) const override { return true; }
  const sql::Statement* wait_ahead(const std::string&, Millis, sql::Params& wait) override {
    wait.set("wake", std::string("w"));
    return &wait_;
  }

 private:
  sql::Statement wait_{"wake.wait_ahead", "wait for the handoff"};
};

}  // namespace

TEST_CASE("a row-lock waiter goes behind the wait its queue offers, decided by the queue alone") {
  // MariaDB's for-update waiter: its numbering reads the failover gate itself, so nothing else
  // travels with the lock statement. Offered a wait by its queue, the lock statement goes behind it.
  for (const bool offered : {true, false}) {
    CAPTURE(offered);
    auto book = std::make_shared<testing::ScriptedSession>();
    book->answers["session.take"] = testing::row_of({"5", "1000", std::nullopt}, 1);
    book->answers["lease.release"] = testing::row_of({}, 1);
    auto holder = std::make_unique<ScriptedHolder>();
    ScriptedHolder* h = holder.get();
    h->session.answers["lock.claim"] = testing::row_of({"1"}, 1);
    h->session.answers["lock.claim_nowait"] = testing::row_of({"1"}, 1);
    if (offered) h->wake = std::make_unique<HeadWake>();
    auto l = gated_locker(Strategy::for_update, std::move(holder), book);
    auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(500));
    REQUIRE(got);
    CHECK(got->state == AcquireOutcome::State::acquired);
    // None offered (PostgreSQL's holder has no queue; MySQL's offers none without blocks): alone.
    CHECK(h->behind == (offered ? std::vector<std::string>{"wake.wait_ahead"} : std::vector<std::string>{}));
    CHECK(l->release(ReleaseRequest{}));
  }
}

TEST_CASE("a txn-insert waiter whose tag follows its INSERT sends its numbering with it, the gate read by the numbering itself") {
  // MariaDB's: its session.take reads the failover gate (no read of its own before a row lock
  // is numbered), and so does its numbering behind the proof; the holder tag follows the INSERT.
  auto book = std::make_shared<testing::ScriptedSession>();
  book->answers["session.take"] = testing::row_of({"5", "1000", std::nullopt}, 1);
  book->answers["lease.release"] = testing::row_of({}, 1);
  book->takes["lock.alive"] = Millis(3);  // a distance
  auto holder = std::make_unique<ScriptedHolder>();
  ScriptedHolder& h = *holder;
  h.wait_ends["lock.insert_claim"] = 3;  // the first attempt's try without waiting, then two slices
  h.session.answers["lock.insert_claim"] = testing::row_of({}, 1);
  h.session.answers["lock.tag"] = testing::row_of({"1", std::nullopt, "1"}, 1);
  auto l = gated_locker(Strategy::txn_insert, std::move(holder), book);
  for (int slice = 0; slice < 2; ++slice) {
    auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(500));
    REQUIRE(got);
    CHECK(got->state == AcquireOutcome::State::busy);
  }
  h.numbered_answer = testing::row_of({"7", "2000", std::nullopt}, 1);  // the grant proven
  auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(500));
  REQUIRE(got);
  CHECK(got->state == AcquireOutcome::State::acquired);
  CHECK(got->token == 7);
  CHECK(h.numberings == 3);  // every wait, the first one too (the try found the key busy)
  CHECK(h.numbered_before_tag == 3);
  // No fence: the numbering reads the gate itself, which was never read apart.
  REQUIRE(h.numbering_params.find("fence"));
  CHECK(std::holds_alternative<std::monostate>(*h.numbering_params.find("fence")));
  CHECK(book->runs["failover.read"] == 0);
  CHECK(book->runs["session.take"] == 0);  // numbered by the chained statement alone
  CHECK(h.session.runs["lock.tag"] == 1);
  CHECK(l->release(ReleaseRequest{}));
}

TEST_CASE("a row-lock waiter far away chains its numbering in its first wait: a short job's holder is followed in one round trip") {
  // Timed only once a first server wait (500 ms) had ended, a holder that let go within it was
  // followed two round trips after its release (scripts/bench.sh, the handoff at 10 ms).
  for (const Millis distance : {Millis(0), Millis(3)}) {
    CAPTURE(distance.count());
    auto [book, hp, l] = chaining(distance, [](ScriptedHolder& x) {
      x.session.answers["lock.claim"] = testing::row_of({"1"}, 1);  // granted in its first wait
      x.wait_ends["lock.claim_nowait"] = 1;                          // the try: busy
    });
    ScriptedHolder& h = *hp;
    auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(500));
    REQUIRE(got);
    CHECK(got->state == AcquireOutcome::State::acquired);
    CHECK(got->token == 5);
    CHECK(h.session.runs["lock.claim_nowait"] == 1);
    CHECK(h.session.runs["lock.claim"] == 1);
    CHECK(h.numberings == (distance.count() > 0 ? 1 : 0));
    CHECK(l->release(ReleaseRequest{}));
  }
}

TEST_CASE("a row-lock waiter times its round trip again after its first wait: a session just made answered late") {
  // On a busy machine a session just made answers its first statements late (its process ran
  // its start-up, and the scheduler lets it wait), which passed loopback for a distance.
  auto [book, hp, l] = chaining(Millis(3), [](ScriptedHolder& x) {
    x.wait_ends["lock.claim_nowait"] = 1;
    x.wait_ends["lock.claim"] = 2;
    x.session.answers["lock.claim"] = testing::row_of({"1"}, 1);
  });
  ScriptedHolder& h = *hp;
  auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(500));
  REQUIRE(got);
  CHECK(got->state == AcquireOutcome::State::busy);
  CHECK(h.numberings == 1);  // its first wait, chained on the first timing
  book->takes["lock.alive"] = Millis(0);  // at once, once it has waited: near
  for (int slice = 0; slice < 2; ++slice) {
    got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(500));
    REQUIRE(got);
  }
  CHECK(got->state == AcquireOutcome::State::acquired);
  CHECK(h.numberings == 1);  // not chained again
  CHECK(book->runs["lock.alive"] == 4);
  CHECK(l->release(ReleaseRequest{}));
}

TEST_CASE("a row-lock run that may wait and finds the key free takes it without a wait, timing nothing") {
  auto [book, hp, l] = chaining(Millis(3), [](ScriptedHolder& x) {
    x.session.answers["lock.claim_nowait"] = testing::row_of({"1"}, 1);
  });
  ScriptedHolder& h = *hp;
  auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(500));
  REQUIRE(got);
  CHECK(got->state == AcquireOutcome::State::acquired);
  CHECK(h.session.runs["lock.claim_nowait"] == 1);
  CHECK(h.session.runs["lock.claim"] == 0);
  CHECK(book->runs["lock.alive"] == 0);
  CHECK(h.numberings == 0);
  CHECK(l->release(ReleaseRequest{}));
}

// A for-update run (no wait) whose dialect gives a first attempt's numbering a wait for its proof
// (`first`: lock.grant_wait) and whose numbering reads the failover gate itself (MariaDB's).
struct FirstChain {
  std::shared_ptr<testing::ScriptedSession> book;
  ScriptedHolder* h;
  std::unique_ptr<Locker> l;
};
FirstChain first_chain(Strategy strategy, bool first, Millis handshake = Millis(20)) {
  auto book = std::make_shared<testing::ScriptedSession>();
  book->answers["session.take"] = testing::row_of({"5", "1000", std::nullopt}, 1);
  book->answers["lease.release"] = testing::row_of({}, 1);
  auto holder = std::make_unique<ScriptedHolder>();
  ScriptedHolder* h = holder.get();
  h->handshake_took = handshake;
  h->session.answers["lock.claim_nowait"] = testing::row_of({"1"}, 1);
  h->session.answers["lock.insert_claim"] = testing::row_of({}, 1);
  h->session.answers["lock.tag"] = testing::row_of({"1", std::nullopt, "1"}, 1);
  return {book, h, gated_locker(strategy, std::move(holder), book, first)};
}

TEST_CASE("a row-lock run's first attempt sends its numbering with its lock statement where the dialect gives its wait for the proof") {
  for (const Strategy strategy : {Strategy::for_update, Strategy::txn_insert}) {
    CAPTURE(to_string(strategy));
    // Proven: the numbering's row is the run's; nothing numbered after, nothing timed.
    auto [book, hp, l] = first_chain(strategy, true);
    ScriptedHolder& h = *hp;
    h.numbered_answer = testing::row_of({"7", "2000", std::nullopt}, 1);
    auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(0));
    REQUIRE(got);
    CHECK(got->state == AcquireOutcome::State::acquired);
    CHECK(got->token == 7);
    CHECK(h.numberings == 1);
    CHECK(h.numbered_before_tag == (strategy == Strategy::txn_insert ? 1 : 0));
    REQUIRE(h.numbering_params.find("poll_ms"));
    CHECK(std::get<std::int64_t>(*h.numbering_params.find("poll_ms")) > 0);
    CHECK(book->runs["session.take"] == 0);
    CHECK(book->runs["lock.alive"] == 0);
    CHECK(l->release(ReleaseRequest{}));
  }
  // Not proven (it came too early and its poll ran out, or the holder session went): numbered
  // after the grant, as before.
  auto [book, hp, l] = first_chain(Strategy::for_update, true);
  auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(0));
  REQUIRE(got);
  CHECK(got->state == AcquireOutcome::State::acquired);
  CHECK(got->token == 5);
  CHECK(hp->numberings == 1);
  CHECK(book->runs["session.take"] == 1);
  CHECK(l->release(ReleaseRequest{}));
  // A key held by another: refused, who holds it told by the numbering's wait (its row after
  // four columns of its own), not read apart; nothing numbered.
  auto [book3, hp3, l3] = first_chain(Strategy::for_update, true);
  hp3->wait_ends["lock.claim_nowait"] = 1;
  hp3->refusal_answer = testing::row_of({"20", std::nullopt, std::nullopt, std::nullopt, "k", "web2:1:a", "web2", "1", "7",
                                         "for-update", "1000", "1000", std::nullopt, std::nullopt, "1000", std::nullopt,
                                         std::nullopt, "2000", "0", std::nullopt});
  got = l3->try_acquire(testing::lock_request(Millis(3000)), Millis(0));
  REQUIRE(got);
  CHECK(got->state == AcquireOutcome::State::busy);
  REQUIRE(got->holder);
  CHECK(got->holder->owner == "web2:1:a");
  CHECK(hp3->numberings == 1);
  CHECK(book3->runs["lease.refusal"] == 0);
  CHECK(book3->runs["session.take"] == 0);
  // Near (a handshake under 2 ms: loopback), or a dialect with no lock.grant_wait: the lock
  // statement alone, then the numbering.
  for (const auto& [can, handshake] : {std::pair{true, Millis(1)}, std::pair{false, Millis(20)}}) {
    auto [book4, hp4, l4] = first_chain(Strategy::for_update, can, handshake);
    got = l4->try_acquire(testing::lock_request(Millis(3000)), Millis(0));
    REQUIRE(got);
    CHECK(got->token == 5);
    CHECK(hp4->numberings == 0);
    CHECK(book4->runs["session.take"] == 1);
    CHECK(l4->release(ReleaseRequest{}));
  }
}

TEST_CASE("a ROLLBACK sent ahead that fails closes the holder session: the next lock statement runs in a new one") {
  auto [hp, l] = slicing(1);
  ScriptedHolder& h = *hp;
  auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(500));
  REQUIRE(got);
  CHECK(got->state == AcquireOutcome::State::busy);
  h.fail_rollback = true;
  got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(500));
  REQUIRE(got);
  CHECK(got->state == AcquireOutcome::State::acquired);
  CHECK(h.closes == 1);
  CHECK(h.reopens == 1);
  // The lock statement ran once in the first transaction and once in the new session's, never
  // in the transaction the ROLLBACK was to end.
  CHECK(h.execs == std::vector<std::string>{"BEGIN", "ROLLBACK ahead", "BEGIN"});
  CHECK(h.session.runs["lock.claim"] == 2);
}

namespace {

// A for-update holder whose claims row is locked at once, with or without a wait, and a book
// that numbers it with token 5 and releases it.
std::unique_ptr<Locker> for_update_locker(std::shared_ptr<testing::ScriptedSession> book) {
  auto holder = std::make_unique<ScriptedHolder>();
  holder->session.answers["lock.claim"] = testing::row_of({"1"}, 1);
  holder->session.answers["lock.claim_nowait"] = testing::row_of({"1"}, 1);
  book->answers["session.take"] = testing::row_of({"5", "1000", std::nullopt}, 1);
  book->answers["lease.release"] = testing::row_of({}, 1);
  return locker(Strategy::for_update, std::move(holder), std::move(book));
}

}  // namespace

TEST_CASE("a waiter's numbering is made ready once a first attempt found the key busy, and a holder's release while it holds") {
  auto book = std::make_shared<testing::ScriptedSession>();
  auto holder = std::make_unique<ScriptedHolder>();
  // The first attempt finds no claims row to lock, twice (busy: core tries again); then locked.
  holder->session.in_turn["lock.claim"] = {testing::row_of({}, 0), testing::row_of({}, 0)};
  holder->session.answers["lock.claim"] = testing::row_of({"1"}, 1);
  book->answers["session.take"] = testing::row_of({"5", "1000", std::nullopt}, 1);
  book->answers["lease.release"] = testing::row_of({}, 1);
  auto l = locker(Strategy::for_update, std::move(holder), book);
  Result<AcquireOutcome> got = fail(ErrorKind::internal, "not tried");
  for (int attempt = 0; attempt < 2; ++attempt) {
    got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(2000));  // may wait 2 s
    REQUIRE(got);
    if (got->state == AcquireOutcome::State::acquired) break;
  }
  REQUIRE(got->state == AcquireOutcome::State::acquired);
  CHECK(book->prepared == std::vector<std::string>{"session.take"});  // before its run
  l->prepare_release();
  CHECK(book->prepared == std::vector<std::string>{"session.take", "lease.release"});
  CHECK(l->release(ReleaseRequest{}));
  CHECK(book->runs["lease.release"] == 1);
}

TEST_CASE("a run that may wait and finds the key free makes its numbering ready not at all") {
  // Made ready at a first attempt, the naming asked the server who serves the session whenever
  // the bookkeeping session was open before the failover read had told: a round trip a run on a
  // free key paid at random (e2e.postgres_round_trips, a -w run on a free key).
  auto book = std::make_shared<testing::ScriptedSession>();
  auto l = for_update_locker(book);
  auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(2000));  // may wait 2 s
  REQUIRE(got);
  REQUIRE(got->state == AcquireOutcome::State::acquired);
  CHECK(book->prepared.empty());
  CHECK(book->runs["session.take"] == 1);
  CHECK(l->release(ReleaseRequest{}));
}

TEST_CASE("a take that does not wait makes nothing ready, and nothing is released unheld") {
  auto book = std::make_shared<testing::ScriptedSession>();
  auto l = for_update_locker(book);
  l->prepare_release();  // nothing held yet
  CHECK(book->prepared.empty());
  REQUIRE(l->try_acquire(testing::lock_request(Millis(3000)), Millis(0)));
  CHECK(book->prepared.empty());
}

TEST_CASE("a take whose row another strategy's holder keeps is refused (config) and gives the server lock back") {
  auto holder = advisory_holder(true);
  ScriptedHolder& h = *holder;
  auto book = std::make_shared<testing::ScriptedSession>();
  book->answers["session.take"] = testing::row_of({std::nullopt, std::nullopt, std::nullopt}, 0);
  // The refusal: a live lease of another host (the 14 status columns, live, due_in).
  book->answers["lease.refusal"] =
      testing::row_of({"k", "web2:1:a", "web2", "1", "7", "lease", "1000", "1000", "31000", std::nullopt, "1000",
                       std::nullopt, std::nullopt, "2000", "1", std::nullopt});
  auto l = locker(Strategy::advisory, std::move(holder), book);
  auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(0));
  REQUIRE_FALSE(got);
  CHECK(got.error().kind == ErrorKind::config);
  CHECK(got.error().message.find("taken with --strategy lease") != std::string::npos);
  CHECK(got.error().message.find("asked for --strategy advisory") != std::string::npos);
  CHECK(h.session.runs["lock.advisory_give_back"] == 1);
}

namespace {

// A for-update locker whose bookkeeping session reads the failover record with who serves it
// (`serving`) and whether it is a Galera node (`galera`), and judges that read (MySQL's way:
// SqlBackend::serving_check) before the first take. The session was handed id 7 at start-up.
struct Judged {
  std::shared_ptr<testing::ScriptedSession> book = std::make_shared<testing::ScriptedSession>();
  ScriptedHolder* holder = nullptr;
  std::unique_ptr<Locker> l;

  Judged(std::int64_t serving, bool galera) {
    book->started = 7;
    book->answers["failover.read"] = testing::row_of({"inc", "inc", std::nullopt, "5", std::nullopt, "1000", "60000", "1",
                                                      "0", "1", std::to_string(serving), galera ? "1" : "0"});
    book->answers["session.take"] = testing::row_of({"5", "1000", std::nullopt}, 1);
    book->answers["doctor.session_id"] = testing::row_of({std::to_string(serving == 7 ? 7 : serving + 1)});
    auto h = std::make_unique<ScriptedHolder>();
    h->session.answers["lock.claim_nowait"] = testing::row_of({"1"}, 1);
    holder = h.get();
    sql::LeaseStatements st = with_failover();
    const sql::Statement session_id{"doctor.session_id", "SELECT id"};
    auto check = [session_id](sql::Session& s, const sql::Rows::Row& row) {
      return sql::session_strategy_answered(s, row, sql::failover::session_column, "failover.read", session_id, Strategy::for_update,
                                            []() -> Result<std::unique_ptr<sql::Session>> {
                                              return fail(ErrorKind::connection, "no second session");
                                            });
    };
    l = sql::make_session_locker(Strategy::for_update, std::move(h), lock_statements(), book, st, "dblock_", 10, check);
  }
};

}  // namespace

TEST_CASE("a session strategy judged on the failover record's read: the session it was given answers, it takes") {
  Judged j(7, false);
  auto got = j.l->try_acquire(testing::lock_request(Millis(3000)), Millis(0));
  REQUIRE(got);
  CHECK(got->state == AcquireOutcome::State::acquired);
  CHECK(j.book->runs["failover.read"] == 1);
  CHECK(j.book->runs["doctor.session_id"] == 0);  // no statement of its own
  CHECK(j.book->seen_direct > 0);
}

TEST_CASE("a session strategy judged on the failover record's read: a Galera node, or transaction pooling, is refused "
          "(config) before the lock is taken") {
  for (auto [serving, galera] : {std::pair{7, true}, std::pair{3, false}}) {
    Judged j(serving, galera);  // 3: a pooler's session, then another (transaction pooling)
    auto got = j.l->try_acquire(testing::lock_request(Millis(3000)), Millis(0));
    REQUIRE_FALSE(got);
    CHECK(got.error().kind == ErrorKind::config);
    CHECK(got.error().message.find(galera ? "Galera" : "transaction pooling") != std::string::npos);
    // Nothing taken: a row lock's statement goes out with the record's read, and goes back
    // unanswered here (ScriptedHolder only keeps what it is sent); its transaction ended.
    CHECK(j.holder->session.runs["lock.claim_nowait"] == 0);
    CHECK_FALSE(j.holder->transaction_open());
    CHECK(j.book->runs["session.take"] == 0);
  }
}

namespace {

// A bookkeeping session that keeps the parameters of each statement it runs (by id) and answers
// from a scripted one.
class RecordingBook final : public sql::Session {
 public:
  Result<sql::Rows> run(const sql::Statement& st, const sql::Params& p) override {
    params[st.id] = p;
    return script.run(st, p);
  }
  Result<void> exec(std::string_view sql) override { return script.exec(sql); }
  void prepare(const sql::Statement& st) override { script.prepare(st); }
  Result<void> reconnect(const Error& why) override { return script.reconnect(why); }
  std::string where() const override { return "scripted"; }
  sql::Waiters& release_signal() override { return script.release_signal(); }

  testing::ScriptedSession script;
  std::map<std::string, sql::Params> params;
};

}  // namespace

namespace {

// A holder whose release runs in its own transaction with the COMMIT after it
// (LockStatements::row_release_ended); `fails`: that statement fails, the COMMIT skipped.
class EndingHolder final : public sql::HolderSession {
 public:
  Result<sql::Rows> run(const sql::Statement& st, const sql::Params& p, Millis w) override { return h.run(st, p, w); }
  Result<void> exec(std::string_view sql) override { return h.exec(sql); }
  Result<void> begin(const sql::LockStatements& st, const sql::Params& p, Millis w) override { return h.begin(st, p, w); }
  Result<sql::Rows> run_and_commit(const sql::Statement& st, const sql::Params& p) override {
    h.execs.push_back(st.id);
    if (fails) return fail(ErrorKind::internal, "the release failed");
    h.execs.emplace_back("COMMIT");
    h.open = false;
    return h.session.run(st, p);
  }
  void close() override {}
  Result<void> reopen() override { return {}; }
  bool transaction_open() const override { return h.transaction_open(); }
  std::string session_id() const override { return "1"; }
  int socket() const override { return 0; }
  Millis server_wait(Millis wait, bool) const override { return wait; }
  void bind(sql::Params&, const std::string&, Millis) const override {}
  sql::Waiters& release_signal() override { return h.release_signal(); }

  ScriptedHolder h;
  bool fails = false;
};

struct EndedRelease {
  std::shared_ptr<RecordingBook> book = std::make_shared<RecordingBook>();
  EndingHolder* holder = nullptr;
  std::unique_ptr<Locker> l;

  explicit EndedRelease(bool fails) {
    auto h = std::make_unique<EndingHolder>();
    h->fails = fails;
    h->h.session.answers["lock.claim_nowait"] = testing::row_of({"4242"}, 1);
    h->h.session.answers["lock.row_release_ended"] = testing::row_of({"1", "1"});
    holder = h.get();
    book->script.answers["session.take"] = testing::row_of({"5", "1000", std::nullopt}, 1);
    book->script.answers["lease.release"] = testing::row_of({"1"}, 1);
    sql::LockStatements lock = lock_statements();
    lock.row_release_ended = {"lock.row_release_ended", "released, recorded, in the holder's transaction"};
    sql::LeaseStatements st = statements();
    st.release_recorded = {"lease.release_recorded", "released, recorded"};
    l = sql::make_session_locker(Strategy::for_update, std::move(h), lock, book, st, "dblock_", 10);
  }
  Result<void> run() {
    auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(0));
    REQUIRE(got);
    REQUIRE(got->state == AcquireOutcome::State::acquired);
    l->prepare_release();
    ReleaseRequest req;
    req.history = RunRecord{};
    return l->release(req);
  }
};

}  // namespace

TEST_CASE("a row lock's release in the holder's own transaction: one statement, then its COMMIT; nothing on the "
          "bookkeeping session") {
  EndedRelease r(false);
  CHECK(r.run());
  CHECK(r.holder->h.execs == std::vector<std::string>{"BEGIN", "lock.row_release_ended", "COMMIT"});
  CHECK(r.book->script.prepared.empty());  // nothing made ready there
  CHECK(r.book->script.runs["lease.release"] == 0);
  CHECK(r.book->script.runs["lease.release_recorded"] == 0);
}

TEST_CASE("a row lock's release that fails in the holder's transaction: the row on the bookkeeping session, then "
          "the ROLLBACK") {
  EndedRelease r(true);
  CHECK(r.run());
  CHECK(r.book->script.runs["lease.release"] == 1);
  CHECK(r.holder->h.execs == std::vector<std::string>{"BEGIN", "lock.row_release_ended", "ROLLBACK"});
  CHECK_FALSE(r.holder->transaction_open());
}

namespace {

// A wake primitive that answers a plain key's taken row itself, as MySQL's folds its hold() into
// that read (Wake::reading_taken): token 5.
class ReadingWake final : public sql::Wake {
 public:
  explicit ReadingWake(std::vector<std::string>& said) : said_(&said) {}
  bool reading_taken(const std::string& key, const sql::Params&, Result<sql::Rows>& answer) override {
    said_->push_back("reading taken " + key);
    answer = testing::row_of({"5", "1000", std::nullopt});
    return true;
  }

 private:
  std::vector<std::string>* said_;
};

// A holder session that notes, in order, the statements it runs and each hook core calls at its
// sites (HolderSession::holding, claim_made), its waiters' queue over ReadingWake. A ROLLBACK of
// a held lock ends the session when `rollback_closes` (MySQL's ROLLBACK RELEASE).
class HookedHolder final : public sql::HolderSession {
 public:
  HookedHolder() : signal_(std::make_unique<ReadingWake>(said)) {}
  Result<sql::Rows> run(const sql::Statement& st, const sql::Params& p, Millis) override {
    said.push_back(st.id);
    return session.run(st, p);
  }
  Result<void> exec(std::string_view sql) override {
    said.emplace_back(sql);
    if (sql == "ROLLBACK" && rollback_closes && held) closed = true;
    open = false;
    return {};
  }
  Result<void> begin(const sql::LockStatements& st, const sql::Params&, Millis) override {
    said.push_back(st.begin);
    open = true;
    return {};
  }
  Result<void> holding(const std::string& key, const sql::Rows& answer) override {
    said.push_back("holding " + key + " (" + (answer.empty() ? "no row" : answer[0].text(0)) + ")");
    held = true;
    if (holding_fails) return fail(ErrorKind::other, "the idle limit was not set");
    return {};
  }
  Result<void> claim_made(bool made) override {
    said.push_back(made ? "claim made" : "claim not made");
    return {};
  }
  void close() override { closed = true; }
  Result<void> reopen() override { return {}; }
  bool transaction_open() const override { return open && !closed; }
  std::string session_id() const override { return "1"; }
  int socket() const override { return closed ? -1 : 0; }
  Millis server_wait(Millis wait, bool) const override { return wait; }
  void bind(sql::Params&, const std::string&, Millis) const override {}
  sql::Waiters& release_signal() override { return signal_; }

  testing::ScriptedSession session;
  std::vector<std::string> said;  // in order: statement ids, SQL exec'd, hooks
  bool rollback_closes = false;
  bool holding_fails = false;
  bool open = false;
  bool held = false;
  bool closed = false;

 private:
  sql::Waiters signal_;
};

std::string joined(const std::vector<std::string>& said) {
  std::string out;
  for (const auto& s : said) out += (out.empty() ? "" : " | ") + s;
  return out;
}

// A row lock's locker on `holder`, its tag and untag statements in place, and a book whose
// session.take numbers the row without returning it (MySQL's): affected 1, no rows.
std::unique_ptr<Locker> tagged_locker(Strategy strategy, std::unique_ptr<HookedHolder> holder,
                                      std::shared_ptr<testing::ScriptedSession> book) {
  sql::LockStatements lock = lock_statements();
  lock.tag = {"lock.tag", "tag"};
  lock.untag = {"lock.untag", "untag"};
  sql::LeaseStatements st = statements();
  st.taken = {"lease.taken", "read back"};
  sql::Rows numbered;
  numbered.affected = 1;
  book->answers["session.take"] = numbered;
  book->answers["lease.release"] = testing::row_of({}, 1);
  return sql::make_session_locker(strategy, std::move(holder), lock, std::move(book), st, "dblock_", 10);
}

}  // namespace

TEST_CASE("core tells the holder session what it does at its sites: the claims row made, the lock taken, its row "
          "read back by the wake primitive, the tag not given back by a session its ROLLBACK ended") {
  auto holder = std::make_unique<HookedHolder>();
  holder->session.in_turn["lock.claim_nowait"] = {sql::Rows{}};  // no claims row yet
  holder->session.answers["lock.claim_nowait"] = testing::row_of({"t"}, 1);
  holder->rollback_closes = true;
  HookedHolder& h = *holder;
  auto book = std::make_shared<testing::ScriptedSession>();
  auto l = tagged_locker(Strategy::for_update, std::move(holder), book);
  auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(0));
  REQUIRE(got);
  REQUIRE(got->state == AcquireOutcome::State::acquired);
  CHECK(got->token == 5);
  // The wake primitive read the row back (folding its hold() in): lease.taken never ran.
  CHECK(book->sent == std::vector<std::string>{"session.take"});
  CHECK(joined(h.said) ==
        "BEGIN | lock.claim_nowait | ROLLBACK | lock.make_claim | claim made | BEGIN | lock.claim_nowait | "
        "holding k (t) | reading taken k");
  h.said.clear();
  CHECK(l->release(ReleaseRequest{}));
  CHECK(joined(h.said) == "ROLLBACK");  // the session ended with it, and the tag with the session
}

TEST_CASE("txn-insert's holding hears the tag's answer; a ROLLBACK that leaves the session open gives the tag back") {
  auto holder = std::make_unique<HookedHolder>();
  holder->session.answers["lock.insert_claim"] = sql::Rows{};
  holder->session.answers["lock.insert_claim"].affected = 1;
  holder->session.answers["lock.tag"] = testing::row_of({"tagged"});
  HookedHolder& h = *holder;
  auto l = tagged_locker(Strategy::txn_insert, std::move(holder), std::make_shared<testing::ScriptedSession>());
  REQUIRE(l->try_acquire(testing::lock_request(Millis(3000)), Millis(0)));
  CHECK(joined(h.said) == "BEGIN | lock.insert_claim | lock.tag | holding k (tagged) | reading taken k");
  h.said.clear();
  CHECK(l->release(ReleaseRequest{}));
  CHECK(joined(h.said) == "ROLLBACK | lock.untag");
}

TEST_CASE("an advisory take tells the holder it holds; a holding that fails gives the lock back and fails the take") {
  auto holder = std::make_unique<HookedHolder>();
  holder->session.answers["lock.advisory_wait"] = testing::row_of({"1"});
  holder->session.answers["lock.advisory_give_back"] = testing::row_of({"1"});
  holder->holding_fails = true;
  HookedHolder& h = *holder;
  auto book = std::make_shared<testing::ScriptedSession>();
  auto l = tagged_locker(Strategy::advisory, std::move(holder), book);
  auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(0));
  REQUIRE_FALSE(got);
  CHECK(joined(h.said) == "lock.advisory_wait | holding k (1) | lock.advisory_give_back");
  CHECK(book->runs["session.take"] == 0);
}

TEST_CASE("a folded advisory take that answers no row did not take the lock: busy, nothing held") {
  auto holder = std::make_unique<HookedHolder>();
  HookedHolder& h = *holder;
  sql::LockStatements lock = lock_statements();
  lock.advisory_numbered_try = {"lock.advisory_numbered_try", "take and number"};
  lock.advisory_numbered_wait = {"lock.advisory_numbered_wait", "take and number"};
  auto book = std::make_shared<testing::ScriptedSession>();
  book->answers["lease.refusal"] = sql::Rows{};
  auto l = sql::make_session_locker(Strategy::advisory, std::move(holder), lock, book, statements(), "dblock_", 10);
  auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(0));
  REQUIRE(got);
  CHECK(got->state == AcquireOutcome::State::busy);
  // Asked once more after a moment (no holder to show), never told it holds.
  CHECK(joined(h.said) == "lock.advisory_numbered_try | lock.advisory_numbered_try");
}

namespace {

// A for-update locker whose numbering reads the failover gate itself (its session_take binds
// :record, as MariaDB's does), on a bookkeeping session whose record's read says the gate is
// `open` (else a lock-delay runs) and who serves it (7, the session it was handed).
struct Gated {
  std::shared_ptr<testing::ScriptedSession> book = std::make_shared<testing::ScriptedSession>();
  ScriptedHolder* holder = nullptr;
  std::unique_ptr<Locker> l;

  explicit Gated(bool open) {
    book->started = 7;
    book->answers["failover.read"] = testing::row_of({"inc", "inc", std::nullopt, "5", open ? std::nullopt : std::optional<std::string>("999999"),
                                                      "1000", "60000", "1", open ? "0" : "1", "1", "7", "0"});
    // The gate found no row in the numbering's own read (the record not yet written, say).
    book->in_turn["session.take"].push_back(sql::Rows{});
    book->answers["session.take"] = testing::row_of({"5", "1000", std::nullopt}, 1);
    auto h = std::make_unique<ScriptedHolder>();
    h->session.answers["lock.claim_nowait"] = testing::row_of({"1"}, 1);
    holder = h.get();
    sql::LeaseStatements st = with_failover();
    st.session_take = {"session.take", "take :record"};
    l = sql::make_session_locker(Strategy::for_update, std::move(h), lock_statements(), book, st, "dblock_", 10);
  }
};

}  // namespace

TEST_CASE("a row lock whose numbering reads the failover gate: no record read while it answers a row; none, "
          "the record read apart, then numbered again") {
  Gated g(true);
  auto got = g.l->try_acquire(testing::lock_request(Millis(3000)), Millis(0));
  REQUIRE(got);
  CHECK(got->state == AcquireOutcome::State::acquired);
  CHECK(got->token == 5);
  CHECK(g.book->runs["failover.read"] == 1);
  CHECK(g.book->runs["session.take"] == 2);
  // The first numbering bound the session it was handed; the second, once the record was read
  // on it, none.
  CHECK(std::get<std::int64_t>(*g.book->last_params["session.take"].find("fence")) == 5);
  CHECK(std::holds_alternative<std::monostate>(*g.book->last_params["session.take"].find("started_id")));
  // The next attempt on the same connection reads no record: its numbering answers.
  CHECK(g.l->release(ReleaseRequest{}));
}

TEST_CASE("a row lock whose numbering reads the failover gate: a closed gate gives the lock back, numbered nothing") {
  Gated g(false);
  auto got = g.l->try_acquire(testing::lock_request(Millis(3000)), Millis(0));
  REQUIRE(got);
  CHECK(got->state == AcquireOutcome::State::busy);  // the lock-delay
  CHECK(g.book->runs["failover.read"] == 1);
  CHECK(g.book->runs["session.take"] == 1);
  CHECK(g.holder->session.runs["lock.claim_nowait"] == 1);
  CHECK_FALSE(g.holder->transaction_open());  // given back
}

TEST_CASE("a folded advisory take that reads the failover gate itself: one that did not open took nothing; the record "
          "read apart, then taken again with its fence") {
  auto holder = std::make_unique<HookedHolder>();
  HookedHolder& h = *holder;
  sql::LockStatements lock = lock_statements();
  lock.advisory_numbered_wait = {"lock.advisory_numbered_wait", "take and number :record"};
  // The advisory holder is the bookkeeping session: the record is read where the take runs.
  h.session.in_turn["lock.advisory_numbered_wait"].push_back(testing::row_of({std::nullopt, std::nullopt, std::nullopt, "2"}));
  h.session.answers["lock.advisory_numbered_wait"] = testing::row_of({"6", "1000", std::nullopt, "1"}, 1);
  auto book = std::make_shared<testing::ScriptedSession>();
  book->answers["failover.read"] = testing::row_of({"inc", "inc", std::nullopt, "5", std::nullopt, "1000", "60000", "1", "0", "1"});
  sql::LeaseStatements st = with_failover();
  auto l = sql::make_session_locker(Strategy::advisory, std::move(holder), lock, book, st, "dblock_", 10);
  auto got = l->try_acquire(testing::lock_request(Millis(3000)), Millis(0));
  REQUIRE(got);
  CHECK(got->state == AcquireOutcome::State::acquired);
  CHECK(got->token == 6);
  CHECK(book->runs["failover.read"] == 1);
  CHECK(joined(h.said) == "lock.advisory_numbered_wait | lock.advisory_numbered_wait | holding k (6)");
  CHECK(std::get<std::int64_t>(*h.session.last_params["lock.advisory_numbered_wait"].find("fence")) == 5);
}

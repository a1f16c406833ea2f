// The session locker (src/core/sql/session_locker.cpp) on a scripted bookkeeping session and a
// server lock of its own: what a release reports when its row statement's reply was lost.

#include <doctest/doctest.h>

#include <memory>

#include "core/sql/session_locker.hpp"
#include "support/scripted_session.hpp"

using namespace dblock;

namespace {

// A server lock that is always taken and, unless told otherwise, given back held.
class FakeLock final : public sql::SessionLock {
 public:
  Result<bool> take(const std::string&, Millis) override { return true; }
  Result<bool> holds(const std::string&) override { return true; }
  Result<void> give_back(const std::string&) override {
    if (lost) return fail(ErrorKind::lost, "GET_LOCK was not held");
    return {};
  }
  std::string session_id() const override { return "1"; }
  int socket() const override { return -1; }
  Result<void> reopen() override { return {}; }
  sql::ReleaseSignal& release_signal() override { return signal_; }

  bool lost = false;

 private:
  sql::ReleaseSignal signal_;
};

sql::LeaseStatements statements() {
  sql::LeaseStatements st;
  st.session_take = {"session.take", "take"};
  st.release = {"lease.release", "release"};
  return st;
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

}  // namespace

TEST_CASE("a session release whose reply was lost, with the server lock held to the end, is no loss") {
  auto book = book_losing_the_release_reply();
  auto lock = std::make_unique<FakeLock>();
  auto locker = sql::make_session_locker(Strategy::advisory, std::move(lock), book, statements(), "dblock_", 10);
  auto got = locker->try_acquire(testing::lock_request(Millis(3000)), Millis(0));
  REQUIRE(got);
  REQUIRE(got->state == AcquireOutcome::State::acquired);
  CHECK(got->token == 5);
  auto released = locker->release(ReleaseRequest{});
  CHECK(book->runs["lease.release"] == 2);
  CHECK(book->reconnects == 1);
  CHECK(released);
}

TEST_CASE("a session release whose server lock was gone is a loss, whatever the row said") {
  auto book = book_losing_the_release_reply();
  auto lock = std::make_unique<FakeLock>();
  lock->lost = true;
  auto locker = sql::make_session_locker(Strategy::advisory, std::move(lock), book, statements(), "dblock_", 10);
  REQUIRE(locker->try_acquire(testing::lock_request(Millis(3000)), Millis(0)));
  auto released = locker->release(ReleaseRequest{});
  REQUIRE_FALSE(released);
  CHECK(released.error().kind == ErrorKind::lost);
}

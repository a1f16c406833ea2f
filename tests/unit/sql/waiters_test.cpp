// The waiters' queue (src/core/sql/waiters.cpp) over a scripted wake primitive: when a waiter
// takes its place, waits, gives it back and takes it again, what the primitive is asked for,
// in order (each call a statement on a server dialect: their number is a handoff's cost).

#include <doctest/doctest.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/sql/sql_session.hpp"
#include "core/sql/waiters.hpp"

using namespace dblock;
using namespace std::chrono_literals;

namespace {

struct Script {
  std::vector<std::string> calls;  // "join k", "wait k", "leave k", "hold k", "settle k", "post k"
  std::deque<Result<bool>> joins, waits;  // answers in turn; then true / false
  int fd = -1;
  std::int64_t place = 1;
  bool head = false;  // at_head
  bool woken = false;  // consume's answer
};

const sql::Statement the_wait{"wake.wait_ahead", "SELECT 1"};

class ScriptedWake final : public sql::Wake {
 public:
  explicit ScriptedWake(Script& s) : s_(&s) {}
  void post(const std::string& key) override { s_->calls.push_back("post " + key); }
  void hold(const std::string& key) override { s_->calls.push_back("hold " + key); }
  void settle(const std::string& key) override { s_->calls.push_back("settle " + key); }
  Result<bool> join(const std::string& key, Millis) override {
    s_->calls.push_back("join " + key);
    return next(s_->joins, true);
  }
  Result<bool> wait(const std::string& key, Millis) override {
    s_->calls.push_back("wait " + key);
    return next(s_->waits, false);
  }
  void leave(const std::string& key) override { s_->calls.push_back("leave " + key); }
  int fd() const override { return s_->fd; }
  std::int64_t place() const override { return s_->place; }
  bool at_head(const std::string&) const override { return s_->head; }
  const sql::Statement* wait_ahead(const std::string& key, Millis left, sql::Params& wait) override {
    s_->calls.push_back("wait_ahead " + key);
    wait.set("wait_ms", std::int64_t{left.count()});
    return &the_wait;
  }
  void taking(const std::string& key, sql::Params& take, bool behind) override {
    s_->calls.push_back("taking " + key + (behind ? " behind" : " alone"));
    take.set("hand", std::int64_t{behind ? 0 : 42});
  }
  void let_in_without(const std::string& key) override { s_->calls.push_back("let_in_without " + key); }
  bool consume() override { return s_->woken; }

 private:
  static Result<bool> next(std::deque<Result<bool>>& answers, bool otherwise) {
    if (answers.empty()) return otherwise;
    auto a = answers.front();
    answers.pop_front();
    return a;
  }
  Script* s_;
};

using Calls = std::vector<std::string>;

}  // namespace

TEST_CASE("waiters: a waiter takes its place once, tries again at once, then only waits") {
  Script s;
  s.waits = {false, true};
  sql::Waiters w(std::make_unique<ScriptedWake>(s));
  CHECK(*w.busy("k", 1000ms) == true);  // a release between the attempt and the place is not missed
  CHECK(*w.busy("k", 1000ms) == false);
  CHECK(*w.busy("k", 1000ms) == true);
  CHECK(s.calls == Calls{"join k", "wait k", "wait k"});
}

TEST_CASE("waiters: without a wait no place is taken, and no place within the wait leaves the answer") {
  Script s;
  sql::Waiters w(std::make_unique<ScriptedWake>(s));
  CHECK(*w.busy("k", 0ms) == false);
  CHECK(s.calls.empty());
  s.joins = {false};
  CHECK(*w.busy("k", 1000ms) == false);
  CHECK(*w.busy("k", 1000ms) == true);  // not placed before: it asks again
  CHECK(s.calls == Calls{"join k", "join k"});
}

TEST_CASE("waiters: a wait for another key gives the first place back") {
  Script s;
  sql::Waiters w(std::make_unique<ScriptedWake>(s));
  REQUIRE(*w.busy("a", 1000ms));
  REQUIRE(*w.busy("b", 1000ms));
  CHECK(s.calls == Calls{"join a", "leave a", "join b"});
}

TEST_CASE("waiters: a place lost with its server session is taken again, not given back") {
  Script s;
  sql::Waiters w(std::make_unique<ScriptedWake>(s));
  REQUIRE(*w.busy("k", 1000ms));
  s.place = 2;  // reconnected
  CHECK(*w.busy("k", 1000ms) == true);
  CHECK(s.calls == Calls{"join k", "join k"});
}

TEST_CASE("waiters: the session's error reaches the caller, and no place is recorded") {
  Script s;
  s.joins = {fail(ErrorKind::connection, "gone")};
  sql::Waiters w(std::make_unique<ScriptedWake>(s));
  auto r = w.busy("k", 1000ms);
  REQUIRE_FALSE(r);
  CHECK(r.error().kind == ErrorKind::connection);
  w.stop_waiting("k");
  CHECK(s.calls == Calls{"join k"});
}

TEST_CASE("waiters: a waiter that core sleeps for on fd() keeps its place; one that blocks gives it back") {
  Script polled;
  polled.fd = 7;
  sql::Waiters p(std::make_unique<ScriptedWake>(polled));
  REQUIRE(*p.busy("k", 1000ms));
  p.stop_waiting("k");
  CHECK(p.fd() == 7);
  CHECK(*p.busy("k", 1000ms) == false);
  CHECK(polled.calls == Calls{"join k", "wait k"});

  Script blocking;
  sql::Waiters b(std::make_unique<ScriptedWake>(blocking));
  REQUIRE(*b.busy("k", 1000ms));
  b.stop_waiting("k");
  b.stop_waiting("k");  // given back once
  CHECK(*b.busy("k", 1000ms) == true);
  CHECK(blocking.calls == Calls{"join k", "leave k", "join k"});
}

TEST_CASE("waiters: the holder's place is given back once it holds (settle); another key's first") {
  Script s;
  sql::Waiters w(std::make_unique<ScriptedWake>(s));
  REQUIRE(*w.busy("k", 1000ms));
  w.holding("k");
  w.released("k");
  CHECK(s.calls == Calls{"join k", "hold k", "settle k", "post k"});
  s.calls.clear();
  REQUIRE(*w.busy("a", 1000ms));
  w.holding("b");
  CHECK(*w.busy("b", 1000ms) == true);  // no place kept for b: taken anew
  CHECK(s.calls == Calls{"join a", "leave a", "hold b", "settle b", "join b"});
}

TEST_CASE("waiters: what hold may leave for later waits for the command (settle), once") {
  Script s;
  sql::Waiters w(std::make_unique<ScriptedWake>(s));
  REQUIRE(*w.busy("k", 1000ms));
  w.holding("k");
  CHECK(s.calls == Calls{"join k", "hold k"});  // nothing more between the take and the command
  w.settle();  // the command runs (Locker::prepare_release)
  w.settle();
  w.released("k");
  CHECK(s.calls == Calls{"join k", "hold k", "settle k", "post k"});
}

TEST_CASE("waiters: without a wake primitive every answer is \"cannot tell\"") {
  sql::Waiters none;
  CHECK(*none.busy("k", 1000ms) == false);
  CHECK(none.fd() == -1);
  none.holding("k");
  none.settle();
  none.released("k");
  none.stop_waiting("k");
  none.consume();
}

namespace {

// The wait ahead of a take of `key` (`alone`: outside a transaction), its id or "" for none.
std::string ahead_of(sql::Waiters& w, const std::string& key, bool alone = true) {
  sql::Params take, wait;
  Millis bound{0};
  const sql::Statement* st = w.ahead(key, take, alone, wait, bound);
  return st ? st->id : std::string();
}

}  // namespace

TEST_CASE("waiters: at the head a take goes behind the primitive's wait, within the attempt's slice; else alone") {
  Script s;
  sql::Waiters w(std::make_unique<ScriptedWake>(s));
  w.attempting(1000ms);
  CHECK(ahead_of(w, "k").empty());  // not at the head
  s.head = true;
  w.attempting(1000ms);
  sql::Params take, wait;
  Millis bound{0};
  const sql::Statement* st = w.ahead("k", take, true, wait, bound);
  REQUIRE(st);
  CHECK(st->id == "wake.wait_ahead");
  CHECK(bound <= 1000ms);
  CHECK(bound > 900ms);
  CHECK(std::get<std::int64_t>(*wait.find("wait_ms")) == bound.count());
  CHECK(std::get<std::int64_t>(*take.find("hand")) == 0);  // the primitive knows it goes behind
  CHECK(ahead_of(w, "k", false).empty());  // in a transaction (a semaphore's slot)
  w.attempting(1ms);
  CHECK(ahead_of(w, "k").empty());  // too little left to wait
  CHECK(s.calls == Calls{"taking k alone", "wait_ahead k", "taking k behind", "taking k alone", "taking k alone"});
}

TEST_CASE("waiters: a take let in without the row gives the wait's lock back and goes alone until a wake is heard") {
  Script s;
  s.head = true;
  sql::Waiters w(std::make_unique<ScriptedWake>(s));
  REQUIRE(*w.busy("k", 1000ms));  // joined
  w.attempting(1000ms);
  REQUIRE(ahead_of(w, "k") == "wake.wait_ahead");
  // Its bound came first: the holder still holds, the head goes on waiting ahead, at once.
  w.behind("k", sql::AheadAnswer::bound_reached, false, true);
  CHECK(*w.busy("k", 1000ms) == true);
  REQUIRE(ahead_of(w, "k") == "wake.wait_ahead");
  // Let in, and taken: nothing to give back.
  w.behind("k", sql::AheadAnswer::let_in, true, true);
  REQUIRE(ahead_of(w, "k") == "wake.wait_ahead");
  s.calls.clear();
  // Let in and refused (no holder kept its handoff): the lock goes back, the next take alone,
  // and the waiter waits for a wake (the blocking primitive's wait), after which it waits ahead.
  w.behind("k", sql::AheadAnswer::let_in, false, true);
  CHECK(ahead_of(w, "k").empty());
  s.waits = {true};
  CHECK(*w.busy("k", 1000ms) == true);
  CHECK(ahead_of(w, "k") == "wake.wait_ahead");
  CHECK(s.calls == Calls{"let_in_without k", "taking k alone", "wait k", "wait_ahead k", "taking k behind"});
  // A take that failed after the wait let it in gives the lock back, and still waits ahead.
  s.calls.clear();
  w.behind("k", sql::AheadAnswer::let_in, false, false);
  CHECK(ahead_of(w, "k") == "wake.wait_ahead");
  // A wake heard on fd() turns waiting ahead on again, too.
  w.behind("k", sql::AheadAnswer::let_in, false, true);
  CHECK(ahead_of(w, "k").empty());
  s.woken = true;
  w.consume();
  CHECK(ahead_of(w, "k") == "wake.wait_ahead");
}

TEST_CASE("waiters: the head whose takes wait ahead keeps its place between slices; given back before another key") {
  Script s;
  s.head = true;
  sql::Waiters w(std::make_unique<ScriptedWake>(s));
  REQUIRE(*w.busy("k", 1000ms));
  w.attempting(1000ms);
  REQUIRE(ahead_of(w, "k") == "wake.wait_ahead");
  w.stop_waiting("k");  // kept: its next take waits again
  w.attempting(1000ms);
  CHECK(ahead_of(w, "k") == "wake.wait_ahead");
  CHECK(*w.busy("k", 1000ms) == true);  // at once, no wait: the take waits ahead
  REQUIRE(*w.busy("a", 1000ms));
  CHECK(s.calls == Calls{"join k", "wait_ahead k", "taking k behind", "wait_ahead k",
                         "taking k behind", "leave k", "join a"});
}

TEST_CASE("waiters: a semaphore's waiter at the head (its takes in a transaction) waits for a wake, never again at once") {
  Script s;
  s.head = true;
  s.fd = 7;  // PostgreSQL's: core sleeps on it
  sql::Waiters w(std::make_unique<ScriptedWake>(s));
  REQUIRE(*w.busy("sem", 1000ms));
  w.attempting(1000ms);
  CHECK(ahead_of(w, "sem/0", false).empty());
  // No wake heard: core sleeps on fd() (trying again at once, it had taken the slot over and over).
  CHECK(*w.busy("sem", 1000ms) == false);
  CHECK(s.calls == Calls{"join sem", "taking sem/0 alone", "wait sem"});
}

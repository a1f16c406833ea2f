#include "core/sql/waiters.hpp"

#include <algorithm>
#include <utility>

// Statements and parameters pass through here by reference only: sql_session.hpp, which hands
// out Waiters, includes this file's header, not the other way round.
namespace dblock::sql {

void Waiters::holding(const std::string& key) {
  if (!wake_) return;
  settle();
  if (!joined_.empty() && joined_ != key) wake_->leave(joined_);
  joined_.clear();
  wake_->hold(key);
  unsettled_ = key;
}

// What hold() may leave for later costs the next holder nothing while this one's command runs,
// where before the command's start it was round trips between a release and the command.
void Waiters::settle() {
  if (wake_ && !unsettled_.empty()) wake_->settle(std::exchange(unsettled_, {}));
}

void Waiters::released(const std::string& key) {
  if (!wake_) return;
  settle();
  wake_->post(key);
}

// A waiter takes its place once per key and then only waits; it tries again at once after
// taking it, so a release between its attempt and its place is not missed.
Result<bool> Waiters::busy(const std::string& key, Millis left) {
  if (!wake_) return false;
  settle();
  // The place went with the server session it was taken on (a reconnect): taken again.
  if (!joined_.empty() && wake_->place() != place_) joined_.clear();
  if (joined_ == key) {
    // At the head, the next take waits for the holder's handoff ahead of itself: try again at
    // once. A primitive that answers at once (core sleeps on its fd()) is asked first all the
    // same: what it heard is news either way; one that blocks is not asked then.
    const bool ahead = waits_ahead(key, left);
    if (!ahead || wake_->fd() >= 0) {
      auto woken = wake_->wait(key, left);
      if (!woken) return woken;
      if (*woken) {
        ahead_ok_ = true;
        return true;
      }
    }
    return ahead;
  }
  // Without a wait (no -w) the answer stands: nothing to queue for.
  if (left <= Millis(0)) return false;
  if (!joined_.empty()) wake_->leave(std::exchange(joined_, {}));
  auto joined = wake_->join(key, left);
  if (!joined || !*joined) return joined;
  joined_ = key;
  place_ = wake_->place();
  ahead_ok_ = true;
  return true;
}

// A wait ahead shorter than this is not worth its statement: the take goes alone.
constexpr Millis shortest_ahead{2};

bool Waiters::waits_ahead(const std::string& key, Millis left) const {
  return ahead_ok_ && alone_ == key && left >= shortest_ahead && wake_->at_head(key);
}

const Statement* Waiters::ahead(const std::string& key, Params& take, bool alone, Params& wait, Millis& bound) {
  if (!wake_) return nullptr;
  alone_ = alone ? key : std::string();
  bound = std::max(Millis(0), std::chrono::duration_cast<Millis>(until_ - std::chrono::steady_clock::now()));
  const Statement* st = waits_ahead(key, bound) ? wake_->wait_ahead(key, bound, wait) : nullptr;
  wake_->taking(key, take, st != nullptr);
  return st;
}

// The wait let the take in, and the row was not taken: no holder kept its handoff (so every
// wait would let the take in at once, a round trip a try), or another contender came first.
// A wait whose bound came first says nothing of the holder: the head goes on waiting ahead.
void Waiters::behind(const std::string& key, AheadAnswer answer, bool taken, bool refused) {
  if (!wake_ || answer != AheadAnswer::let_in || taken) return;
  wake_->let_in_without(key);
  if (refused) ahead_ok_ = false;
}

// A waiter that core sleeps for on fd() keeps its place meanwhile; one whose primitive blocks
// in a statement gives it back, or it would hold the key's other waiters back while it does not
// wait; but not the head whose takes wait ahead: its next take waits again a round trip later,
// where giving the place back and queueing again cost three. It goes back before anything else
// is waited for or held (busy, holding), and with the session.
void Waiters::stop_waiting(const std::string& key) {
  if (!wake_ || joined_ != key || wake_->fd() >= 0) return;
  if (ahead_ok_ && alone_ == key && wake_->at_head(key)) return;
  wake_->leave(key);
  joined_.clear();
}

}  // namespace dblock::sql

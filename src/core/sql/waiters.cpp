#include "core/sql/waiters.hpp"

#include <utility>

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
  if (joined_ == key) return wake_->wait(key, left);
  // Without a wait (no -w) the answer stands: nothing to queue for.
  if (left <= Millis(0)) return false;
  if (!joined_.empty()) wake_->leave(std::exchange(joined_, {}));
  auto joined = wake_->join(key, left);
  if (!joined || !*joined) return joined;
  joined_ = key;
  place_ = wake_->place();
  return true;
}

// A waiter that core sleeps for on fd() keeps its place meanwhile; one whose primitive blocks
// in a statement gives it back, or it would hold the key's other waiters back while it does not
// wait.
void Waiters::stop_waiting(const std::string& key) {
  if (!wake_ || joined_ != key || wake_->fd() >= 0) return;
  wake_->leave(key);
  joined_.clear();
}

}  // namespace dblock::sql

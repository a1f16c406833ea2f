#include "core/heartbeat.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "core/clock.hpp"
#include "core/duration.hpp"
#include "core/log.hpp"

namespace dblock {

using namespace std::chrono_literals;

Millis HeartbeatTiming::retry_interval() const { return std::clamp(ttl / 10, Millis(200), Millis(2000)); }

Millis HeartbeatTiming::safety_margin() { return 1000ms; }

Heartbeat::Heartbeat() {
  event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  thread_ = std::thread([this] { loop(); });
}

void Heartbeat::start(Locker& locker, Millis ttl, Millis acquired_sent_at) {
  std::lock_guard lock(mutex_);
  locker_ = &locker;
  timing_ = HeartbeatTiming{ttl};
  state_.deadline = acquired_sent_at + ttl;
  renewing_ = true;  // the thread's first act (loop)
  cv_.notify_all();
}

Heartbeat::~Heartbeat() {
  stop();
  let_go();
  if (thread_.joinable()) thread_.join();
  if (event_fd_ >= 0) ::close(event_fd_);
}

void Heartbeat::drain() {
  std::uint64_t v;
  while (event_fd_ >= 0 && ::read(event_fd_, &v, sizeof v) == sizeof v) {
  }
}

Heartbeat::State Heartbeat::state() const {
  std::lock_guard lock(mutex_);
  return state_;
}

void Heartbeat::stop() {
  // No wake-up: woken now, the thread took the CPU from the release that follows (a perf
  // sched trace of a handoff showed it), where all it would do is end. It ends when let_go()
  // wakes it, after the release, or at its next step (250 ms at most); it never renews again.
  std::unique_lock lock(mutex_);
  stopping_ = true;
  idle_cv_.wait(lock, [this] { return !renewing_; });
}

void Heartbeat::let_go() {
  std::lock_guard lock(mutex_);
  cv_.notify_all();
}

void Heartbeat::notify_changed() {
  if (event_fd_ < 0) return;
  std::uint64_t one = 1;
  // The counter cannot overflow (the loop drains it) and a failed wake-up only delays the
  // loop until its next timer, so the result is not needed.
  ssize_t ignored = ::write(event_fd_, &one, sizeof one);
  (void)ignored;
}

void Heartbeat::loop() {
  std::unique_lock lock(mutex_);
  // Parked until start(); stopped first (the lock not taken, the command not started), it
  // never touches a locker.
  cv_.wait(lock, [this] { return locker_ != nullptr || stopping_; });
  if (!locker_) return;
  Millis next = state_.deadline - timing_.ttl + timing_.interval();
  lock.unlock();
  // First, while the command runs and before anything is due, the release made ready
  // (locker.hpp); always, even when stop() came first, so every run does the same work. The
  // constructor set renewing_, so stop() waits for it: the release never runs alongside.
  locker_->prepare_release();
  lock.lock();
  renewing_ = false;
  idle_cv_.notify_all();
  for (;;) {
    // CLOCK_BOOTTIME has no condition-variable clock; wait in short steps instead.
    Millis now{0};
    while (!stopping_) {
      now = boottime_now();
      if (now >= next) break;
      cv_.wait_for(lock, std::min(next - now, Millis(250)));
    }
    if (stopping_) return;
    renewing_ = true;
    lock.unlock();

    const Millis sent = boottime_now();
    auto renewed = locker_->renew(timing_.ttl);
    const Millis replied = boottime_now();

    // Log lines are built under the mutex but written after it is released: a slow stderr
    // (a full pipe) must never hold up state() on the supervision loop.
    std::string line;
    lock.lock();
    renewing_ = false;
    idle_cv_.notify_all();
    if (renewed) {
      state_.deadline = sent + timing_.ttl;
      if (state_.failures > 0) line = "renewed after " + std::to_string(state_.failures) + " failed tries; ";
      state_.failures = 0;
      state_.last_error.clear();
      next = sent + timing_.interval();
      line += "renewed the lock for " + format_duration(timing_.ttl) + " (" + format_duration(replied - sent) + ")";
    } else if (renewed.error().kind == ErrorKind::lost) {
      state_.lost = true;
      state_.last_error = renewed.error().message;
      lock.unlock();
      notify_changed();
      return;
    } else {
      ++state_.failures;
      state_.last_error = renewed.error().message;
      line = "renew failed (" + renewed.error().message + "); retrying in " + format_duration(timing_.retry_interval());
      next = replied + timing_.retry_interval();
    }
    lock.unlock();
    log::verbose(line);
    notify_changed();
    lock.lock();
  }
}

}  // namespace dblock

#include "support/fake_locker.hpp"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "core/clock.hpp"

namespace dblock::test {
namespace {

// This process's children (any thread's) that have not exited, from /proc: a guard waiting to be
// let go (S), or on its way there (R: on a busy machine it may not have reached its wait yet).
// One that exited is a zombie (Z) until reaped, or gone.
int live_children() {
  int n = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream children(task.path() / "children");
    for (long pid; children >> pid;) {
      std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
      std::string line;
      std::getline(stat, line);
      const auto paren = line.rfind(')');
      if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z' && line[paren + 2] != 'X') ++n;
    }
  }
  return n;
}

class FakeLocker final : public Locker {
 public:
  explicit FakeLocker(std::shared_ptr<FakeScript> script) : s_(std::move(script)) {}
  ~FakeLocker() override {
    if (s_->on_locker_gone) s_->on_locker_gone();
  }

  Result<AcquireOutcome> try_acquire(const LockRequest&, Millis wait) override {
    const int attempt = ++s_->attempts;
    {
      std::lock_guard lock(s_->mutex);
      s_->attempt_waits.push_back(wait);
      s_->attempt_times.push_back(boottime_now());
    }
    if (s_->raise_signal && attempt == s_->raise_on_attempt) ::raise(s_->raise_signal);
    if (s_->acquire_error) return std::unexpected(*s_->acquire_error);
    if (attempt <= s_->connection_errors)
      return fail(ErrorKind::connection, "fake: connection refused (attempt " + std::to_string(attempt) + ")");
    AcquireOutcome out;
    const Millis now = boottime_now();
    if (s_->not_due_in) {
      if (!s_->due_until) s_->due_until = now + *s_->not_due_in;
      if (now < *s_->due_until) {
        out.state = AcquireOutcome::State::not_due;
        out.due_in = *s_->due_until - now;
        return out;
      }
    }
    if (attempt <= s_->busy_attempts) {
      out.state = AcquireOutcome::State::busy;
      out.holder = s_->holder;
      return out;
    }
    out.state = AcquireOutcome::State::acquired;
    out.token = ++s_->next_token;
    out.acquired_at_ms = 1'700'000'000'000;
    out.expires_at_ms = 1'700'000'030'000;
    s_->acquired_at = now;
    return out;
  }

  Result<void> renew(Millis) override {
    if (s_->renew_delay > Millis(0)) std::this_thread::sleep_for(s_->renew_delay);
    ++s_->renews;
    const Millis since = s_->acquired_at ? boottime_now() - *s_->acquired_at : Millis(0);
    if (s_->renew_fail_after && since >= *s_->renew_fail_after &&
        (!s_->renew_fail_until || since < *s_->renew_fail_until)) {
      ++s_->failed_renews;
      return fail(s_->renew_error, "fake renew failure");
    }
    return {};
  }

  void prepare_release() override { ++s_->releases_prepared; }

  Result<void> release(const ReleaseRequest& req) override {
    std::lock_guard lock(s_->mutex);
    s_->prepared_before_release.push_back(s_->releases_prepared);
    s_->live_children_at_release.push_back(live_children());
    s_->releases.push_back(req);
    if (s_->release_error) return std::unexpected(*s_->release_error);
    return {};
  }

  int wakeup_fd() const override { return s_->wakeup_fd; }

  void consume_wakeup() override {
    ++s_->wakeups_consumed;
    char buf[64];
    while (s_->wakeup_fd >= 0 && ::read(s_->wakeup_fd, buf, sizeof buf) > 0) {
    }
  }

 private:
  std::shared_ptr<FakeScript> s_;
};

}  // namespace

std::unique_ptr<Locker> make_fake_locker(std::shared_ptr<FakeScript> script) {
  return std::make_unique<FakeLocker>(std::move(script));
}

OpenLocker fake_opener(std::shared_ptr<FakeScript> script) {
  return [script]() -> Result<std::unique_ptr<Locker>> {
    ++script->opens;
    if (script->open_error) return std::unexpected(*script->open_error);
    return make_fake_locker(script);
  };
}

}  // namespace dblock::test

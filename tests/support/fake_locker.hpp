#pragma once
// An in-memory Locker for unit tests of core with no database (ninja's
// VirtualFileSystem idea). Tests script it (busy N times, renew failing from time T, a
// signal raised during an attempt...) and inspect what core asked of it afterwards.

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/acquire_loop.hpp"
#include "core/locker.hpp"

namespace dblock::test {

/// Script and record of one fake lock; shared by every locker made from it, so
/// tests can read it after run_job destroyed its locker.
struct FakeScript {
  // --- script (set before use) ---
  int busy_attempts = 0;                     // the first N try_acquire answer busy
  std::optional<Millis> not_due_in;          // answer not_due with this due_in (until due_until passes)
  std::optional<LockStatus> holder;          // returned with busy
  int raise_signal = 0;                      // raise(raise_signal) during attempt raise_on_attempt
  int raise_on_attempt = 1;
  std::optional<Error> acquire_error;        // try_acquire fails with this
  int connection_errors = 0;                 // the first N try_acquire fail with ErrorKind::connection,
                                             // "fake: connection refused (attempt N)"
  std::optional<Millis> renew_fail_after;    // renews fail once this long has passed since acquire
  std::optional<Millis> renew_fail_until;    // ...and succeed again once this long has passed
  ErrorKind renew_error = ErrorKind::connection;
  Millis renew_delay{0};                     // each renew takes this long (a slow database)
  std::optional<Error> release_error;        // release fails with this
  std::optional<Error> open_error;           // fake_opener fails with this
  int wakeup_fd = -1;                        // returned by Locker::wakeup_fd()
  std::function<void()> on_locker_gone;      // called as a locker is destroyed

  // --- record (read after use) ---
  std::mutex mutex;
  std::atomic<int> opens{0};
  std::atomic<int> attempts{0};
  std::atomic<int> renews{0};
  std::atomic<int> failed_renews{0};
  std::atomic<int> wakeups_consumed{0};
  std::vector<Millis> attempt_waits;         // the `wait` of every try_acquire
  std::vector<Millis> attempt_times;         // CLOCK_BOOTTIME of every try_acquire
  std::vector<ReleaseRequest> releases;
  std::atomic<int> releases_prepared{0};     // prepare_release calls
  std::vector<int> prepared_before_release;  // releases_prepared at each release
  std::vector<int> live_children_at_release;  // this process's children not exited at each release
  std::int64_t next_token = 41;              // the next acquisition gets next_token + 1
  std::optional<Millis> acquired_at;         // CLOCK_BOOTTIME of the successful acquire
  std::optional<Millis> due_until;           // not_due answers stop after this
};

/// A locker on its own, for acquire_with_wait tests.
std::unique_ptr<Locker> make_fake_locker(std::shared_ptr<FakeScript> script);

/// What cli hands run_job: opens a fake locker (or fails with script->open_error), counting opens.
OpenLocker fake_opener(std::shared_ptr<FakeScript> script);

}  // namespace dblock::test

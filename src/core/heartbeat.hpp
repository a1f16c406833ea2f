#pragma once
// Keeps a held lock alive while the command runs (dblock(1), STRATEGIES): renews
// every ttl/3 on its own thread, so a database call that takes its whole time bound never
// delays the supervision loop's kill schedule.

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "core/locker.hpp"
#include "core/lock_types.hpp"

namespace dblock {

/// The renewal schedule and the safety margin, in one place so validate_run_timing and the
/// heartbeat agree.
struct HeartbeatTiming {
  Millis ttl;
  Millis interval() const { return ttl / 3; }
  /// After a failed renew, the next try comes this soon (a few tries fit before the deadline).
  Millis retry_interval() const;
  /// Kept free between SIGKILL and the local deadline: covers scheduling and the kill itself.
  static Millis safety_margin();
};

class Heartbeat {
 public:
  struct State {
    Millis deadline{0};     // CLOCK_BOOTTIME: last successful renew (or the acquire) sent + ttl
    bool lost = false;      // ErrorKind::lost: final, no more renewing
    int failures = 0;       // consecutive failed renews
    std::string last_error;
  };

  /// Made before the lock is asked for, its thread parked until start(): a thread that cannot
  /// be made (a process limit counts threads too) is then a run that never started, refused
  /// with nothing taken (run_job.cpp), not a lock taken and left to expire. Throws
  /// std::system_error as std::thread does.
  Heartbeat();
  /// Once the command has started: renews `locker`'s lock from now on. acquired_sent_at: when
  /// the acquiring request was sent (CLOCK_BOOTTIME). Wakes the parked thread: no thread is
  /// made between the grant and the command.
  void start(Locker& locker, Millis ttl, Millis acquired_sent_at);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  /// Readable whenever the state changed (an eventfd); read it with drain().
  int fd() const { return event_fd_; }
  void drain();
  State state() const;
  /// Stops renewing: waits for a renew in flight (time-bounded), after which the thread never
  /// touches the locker again. The thread is woken by let_go() (or the destructor), so the
  /// release need neither share the CPU with it nor wait for it to end.
  void stop();
  /// After stop() and the release: wakes the thread to end now, alongside dblock's own end,
  /// so the destructor's join finds it ended.
  void let_go();

 private:
  void loop();
  void notify_changed();

  Locker* locker_ = nullptr;  // set by start(), under the mutex
  HeartbeatTiming timing_{};
  int event_fd_ = -1;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;  // renewing_ went false
  bool stopping_ = false;
  bool renewing_ = false;  // the thread uses the locker (its first prepare_release, or a renew)
  State state_;
  std::thread thread_;
};

}  // namespace dblock

#pragma once
// A session's waiters' queue, once for every dialect: when a waiter takes a place among a key's
// waiters, when it waits for a wake and how long, when it tries again at once, when it gives its
// place back, and what a holder and a release tell the others. Under it each dialect writes only
// its wake primitive (Wake): PostgreSQL LISTEN/NOTIFY behind a queue lock, MySQL named locks,
// SQLite futex words in <database>-wake.

#include <memory>
#include <optional>
#include <string>

#include "core/error.hpp"
#include "core/lock_types.hpp"

namespace dblock::sql {

class Params;  // sql_session.hpp
class Rows;    // sql_session.hpp

/// A dialect's wake primitive: how one waiter of a key is told that the key may have been
/// released. One place among a key's waiters at a time; the queue (Waiters) says which and when.
/// An error is the session's, which the locker reconnects (never the primitive: the locker must
/// know, see failover.hpp).
class Wake {
 public:
  virtual ~Wake() = default;
  /// A release of `key` has committed: wake one of its waiters (nothing where the release
  /// statement itself wakes them).
  virtual void post(const std::string& /*key*/) {}
  /// This session took `key`, before its command starts: what its release will wake is set up
  /// (what a waiter that comes next must find in place).
  virtual void hold(const std::string& /*key*/) {}
  /// Once the command runs (Locker::prepare_release, off the command's start): a place this
  /// session had among `key`'s waiters is given back, and what else hold() could leave for later
  /// is done. A round trip here is not one between the release and the next holder's command.
  virtual void settle(const std::string& /*key*/) {}
  /// Takes a place among `key`'s waiters, waiting up to `left` for it where waiters queue:
  /// true once this session hears `key`'s next wake; false: no place within `left`.
  virtual Result<bool> join(const std::string& /*key*/, Millis /*left*/) { return false; }
  /// Whether a wake of `key` came since the place was taken or last looked at, blocking up to
  /// `left` where the primitive can; a primitive that cannot block answers at once (core then
  /// sleeps on fd()). A place that a primitive gives back by itself, it takes again here.
  virtual Result<bool> wait(const std::string& /*key*/, Millis /*left*/) { return false; }
  /// An attempt on `key` starts that may wait up to `left` in all (core's slice of the wait): a
  /// primitive that waits in the server ahead of the attempt's own statement waits no longer.
  virtual void attempting(const std::string& /*key*/, Millis /*left*/) {}
  /// A lease take of `key` is about to run with `take` (its parameters): a primitive that hands
  /// the key over between holder and waiter adds what the take binds for it, and sends what must
  /// run ahead of it in its round trip. An error is the session's, as the take's would be.
  virtual Result<void> taking(const std::string& /*key*/, Params& /*take*/) { return {}; }
  /// That lease take of `key` answered `took`: a primitive whose part the take did for it (the
  /// key's wake taken with the row) notes it, and hold() then sends nothing of it.
  virtual void took(const std::string& /*key*/, const Rows& /*took*/) {}
  /// A session strategy's take numbered the row of plain `key`, which is now read back
  /// (LeaseStatements::taken with `read`, before hold()): a primitive that does hold()'s work in
  /// the same round trip answers the read itself, the taken row's columns first, and hold() then
  /// sends nothing: true, with its answer in `answer`; false: core runs the read. An error in
  /// `answer` is the session's, as the read's would be. (Rows stays a name here: sessions hand
  /// out Waiters, so sql_session.hpp includes this file, not the other way round.)
  virtual bool reading_taken(const std::string& /*key*/, const Params& /*read*/, Result<Rows>& /*answer*/) {
    return false;
  }
  /// A lease release of `key` is about to run: what the take set up for the handoff goes in the
  /// release's round trip (what is still left after its commit, post()).
  virtual void releasing(const std::string& /*key*/) {}
  /// Gives the place among `key`'s waiters back.
  virtual void leave(const std::string& /*key*/) {}
  /// Readable when a wake may have come (core polls it), or -1: core's backoff.
  virtual int fd() const { return -1; }
  /// Drops what made fd() readable.
  virtual void consume() {}
  /// The server session a place is held on: a different one (a reconnect) lost the place.
  virtual std::int64_t place() const { return 0; }
};

/// How a session's waiters hear that a key may have been released, so they try again at once
/// instead of on core's backoff, one waiter of a key at a time. Without a wake primitive every
/// answer is "cannot tell".
class Waiters {
 public:
  Waiters() = default;
  explicit Waiters(std::unique_ptr<Wake> wake) : wake_(std::move(wake)) {}

  /// The lock on `key` was taken by this session's process.
  void holding(const std::string& key);
  /// The command of the holding() runs: the wake primitive's settle(). Before anything else the
  /// queue does, if nothing called it yet.
  void settle();
  /// The lock on `key` was let go (after the commit).
  void released(const std::string& key);
  /// An attempt found `key` busy. May block up to `left` until a release may have happened;
  /// true: try again at once; false: no such news, the answer stands. An error is the session's.
  Result<bool> busy(const std::string& key, Millis left);
  /// An attempt on `key` starts that may wait up to `left` (Wake::attempting).
  void attempting(const std::string& key, Millis left) {
    if (wake_) wake_->attempting(key, left);
  }
  /// A lease take of `key` is about to run with `take` (Wake::taking); the take's sites call it
  /// (lease_locker.cpp), whatever the dialect.
  Result<void> taking(const std::string& key, Params& take) { return wake_ ? wake_->taking(key, take) : Result<void>{}; }
  /// That take answered `took` (Wake::took).
  void took(const std::string& key, const Rows& took) {
    if (wake_) wake_->took(key, took);
  }
  /// A session strategy's plain `key` has its taken row read back with `read` (Wake::reading_taken;
  /// session_locker.cpp): true with the wake primitive's answer in `answer`, false when core runs
  /// the read.
  bool reading_taken(const std::string& key, const Params& read, Result<Rows>& answer) {
    return wake_ && wake_->reading_taken(key, read, answer);
  }
  /// A lease release of `key` is about to run (Wake::releasing; lock_steps.cpp, release_row).
  void releasing(const std::string& key) {
    if (wake_) wake_->releasing(key);
  }
  /// The caller stops waiting for `key` without taking it.
  void stop_waiting(const std::string& key);
  /// Readable when a release may have happened (core polls it), or -1.
  int fd() const { return wake_ ? wake_->fd() : -1; }
  void consume() {
    if (wake_) wake_->consume();
  }

 private:
  std::unique_ptr<Wake> wake_;
  std::string joined_;      // the key this session has a place among the waiters of, or ""
  std::string unsettled_;   // the key holding() took and settle() has not yet settled, or ""
  std::int64_t place_ = 0;  // Wake::place() when it was taken
};

}  // namespace dblock::sql

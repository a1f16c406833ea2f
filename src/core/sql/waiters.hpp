#pragma once
// A session's waiters' queue, once for every dialect: when a waiter takes a place among a key's
// waiters, when it waits for a wake and how long, when it tries again at once, when it gives its
// place back, and what a holder and a release tell the others. Under it each dialect writes only
// its wake primitive (Wake): PostgreSQL LISTEN/NOTIFY behind a queue lock, MySQL named locks,
// SQLite futex words in <database>-wake.

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "core/error.hpp"
#include "core/lock_types.hpp"

namespace dblock::sql {

class Params;     // sql_session.hpp
class Rows;       // sql_session.hpp
struct Statement;  // sql_session.hpp

/// What a wait sent ahead of a statement in its round trip (Session::run_behind) told.
enum class AheadAnswer {
  untold,         // not sent, or its answer was lost
  let_in,         // it ended before its bound: it took its lock, or had none to wait for
  bound_reached,  // its bound came first
};

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
  /// This session's place is at the head of `key`'s waiters, where a lease take may wait in the
  /// server for the holder's handoff ahead of itself (wait_ahead).
  virtual bool at_head(const std::string& /*key*/) const { return false; }
  /// The wait for the holder's handoff of `key` that a lease take at the head sends ahead of
  /// itself in its round trip, bound to `left` (a statement of wake_statements or
  /// queue_statements, its parameters set in `wait`); nullptr: the take goes alone.
  virtual const Statement* wait_ahead(const std::string& /*key*/, Millis /*left*/, Params& /*wait*/) { return nullptr; }
  /// A lease take of `key` is about to run with `take` (its parameters), `behind` a wait_ahead or
  /// alone: a primitive that hands the key over between holder and waiter adds what the take
  /// binds for it.
  virtual void taking(const std::string& /*key*/, Params& /*take*/, bool /*behind*/) {}
  /// A wait_ahead let the take of `key` in (AheadAnswer::let_in) and the take did not take the
  /// row: what the wait took is given back.
  virtual void let_in_without(const std::string& /*key*/) {}
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
  /// Drops what made fd() readable: true when it was a wake.
  virtual bool consume() { return false; }
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
  /// An attempt starts that may wait up to `left` in all (core's slice of the wait): a wait sent
  /// ahead of its take (ahead) waits no longer.
  void attempting(Millis left) { until_ = std::chrono::steady_clock::now() + left; }
  /// A lease take of `key` is about to run with `take`; `alone`: outside a transaction (a wait
  /// ahead of it in its round trip must end a transaction of its own, Session::run_behind). The
  /// wait to send ahead of it (Wake::wait_ahead, its parameters in `wait`, its bound in `bound`),
  /// or nullptr; the primitive adds what the take binds (Wake::taking). The take's sites call it
  /// (lease_locker.cpp), whatever the dialect.
  const Statement* ahead(const std::string& key, Params& take, bool alone, Params& wait, Millis& bound);
  /// That take answered `took` (Wake::took).
  void took(const std::string& key, const Rows& took) {
    if (wake_) wake_->took(key, took);
  }
  /// A take of `key` sent behind a wait (ahead) ran: the wait told `answer`, and the take `taken`
  /// the row or not (`refused`: it answered without it; false also when it failed). Let in
  /// without the row, what the wait took goes back; refused so, the head's takes go alone until
  /// a wake is heard (a holder that keeps no handoff would let every wait in at once).
  void behind(const std::string& key, AheadAnswer answer, bool taken, bool refused);
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
    if (wake_ && wake_->consume()) ahead_ok_ = true;
  }

 private:
  /// The head of `key`'s waiters, whose last lease take could wait ahead, may wait ahead within
  /// `left` again.
  bool waits_ahead(const std::string& key, Millis left) const;

  std::unique_ptr<Wake> wake_;
  std::string joined_;      // the key this session has a place among the waiters of, or ""
  std::string unsettled_;   // the key holding() took and settle() has not yet settled, or ""
  std::int64_t place_ = 0;  // Wake::place() when it was taken
  std::chrono::steady_clock::time_point until_{};  // the end of the attempt's slice (attempting)
  std::string alone_;     // the key whose last lease take went outside a transaction (ahead), or ""
  bool ahead_ok_ = true;  // the head's takes may wait ahead: no take let in without the row since a wake
};

}  // namespace dblock::sql

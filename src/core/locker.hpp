#pragma once
// The lock as core sees it: one attempt, one renew, one release. Backends implement it and
// answer for one statement's worth of database work each time; waiting, backoff, deadlines,
// heartbeats, the child process and every decision about them live in core (docs/design.md).
//
// Threading contract, the same for every backend:
//  - try_acquire, release, session_fd, wakeup_fd and consume_wakeup run on the thread that
//    created the locker (run's main thread).
//  - Between a successful try_acquire and release, and only then, renew runs on the heartbeat
//    thread (core/heartbeat.cpp). Core stops and joins the heartbeat before it calls release,
//    so renew never runs at the same time as try_acquire or release, and a Locker needs no
//    lock of its own for its state. A backend whose connection is shared with something else
//    on the other thread (none today) must guard that connection itself.
//  - session_fd() is read once after acquire, on the main thread; the fd stays valid until
//    release or destruction.

#include <memory>

#include "core/error.hpp"
#include "core/lock_types.hpp"

namespace dblock {

/// A lock of one strategy, holding whatever connections that strategy needs. At most one
/// key is held at a time. Destroying a Locker that still holds a session lock drops its
/// connection, which frees the lock; a held lease is left to expire.
class Locker {
 public:
  virtual ~Locker() = default;

  /// One attempt to take req.key. `wait` is how long the server may block this call
  /// (session strategies; 0 = answer at once); lease never blocks. On `acquired` the
  /// fencing token is strictly greater than every earlier token of the key, the row in
  /// <prefix>locks names the holder, and last_started_at is database now.
  virtual Result<AcquireOutcome> try_acquire(const LockRequest& req, Millis wait) = 0;

  /// Lease: pushes expires_at to database now + ttl, compared on owner and token, and
  /// reconnects once if the connection dropped. Session strategies: proves the session still
  /// holds the lock (never reconnects). ErrorKind::lost when the lock is definitively gone,
  /// ErrorKind::connection when it may be transient.
  virtual Result<void> renew(Millis ttl) = 0;

  /// Lets go of what try_acquire took (owner- and token-checked), honours min_hold, and
  /// writes the history row and last_* columns when asked.
  virtual Result<void> release(const ReleaseRequest& req) = 0;

  /// Called once while the command runs, on the heartbeat's thread (it uses the locker as a
  /// renew does, never alongside try_acquire or release): the locker may make ready what its
  /// release will run, which the next waiter waits for. Best effort; the default does nothing.
  virtual void prepare_release() {}

  /// Session strategies: the socket of the connection whose session holds the lock, or -1
  /// (lease, or nothing held). Core watches it for the server closing the session and keeps a
  /// duplicate open until the command's whole process tree is dead; it never reads or writes it.
  virtual int session_fd() const { return -1; }

  /// A descriptor that becomes readable when a release of the key may have happened
  /// (PostgreSQL LISTEN/NOTIFY), or -1 when the backend cannot tell; core polls it while waiting.
  virtual int wakeup_fd() const { return -1; }
  /// Drains whatever made wakeup_fd() readable.
  virtual void consume_wakeup() {}
};

}  // namespace dblock

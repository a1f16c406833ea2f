#pragma once
// The narrow interface between core and a database. Backends say what happened in *one*
// attempt (acquired / busy / not due / failed); waiting, backoff, deadlines, heartbeats and
// the child process live once in core.

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/lock_types.hpp"

namespace dblock {

/// Settings every backend honours, filled by cli from options, environment and config file.
struct BackendOptions {
  std::string table_prefix = "dblock_";  // already validated as an SQL identifier
  int history_keep = 1000;                // newest runs kept per key in <prefix>runs
  Millis connect_timeout{5000};           // bound on establishing a connection
  Millis io_timeout{5000};                // bound on each statement's round trip (read and write)
  // How long the server may leave a session-lock holder's session idle before ending it, which
  // frees the lock of a holder cut off from the server. 0: never (no lock held for a TTL).
  Millis session_idle_limit{0};
};

/// What a connection is for: only the session that holds a session lock gets
/// session_idle_limit; every other connection keeps the server's idle killers off.
enum class ConnectionRole { bookkeeping, lock_holder };

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

/// One open database, for the administrative operations.
class Backend {
 public:
  virtual ~Backend() = default;

  /// "sqlite", "mysql", "postgres".
  virtual std::string_view name() const = 0;

  /// Creates <prefix>locks and <prefix>runs if missing; a table of the wrong shape is
  /// ErrorKind::config naming the missing column.
  virtual Result<void> ensure_schema() = 0;

  /// A locker for the strategy; ErrorKind::config with a sentence naming the strategies
  /// this backend can do when it cannot do this one.
  virtual Result<std::unique_ptr<Locker>> make_locker(Strategy strategy) = 0;

  /// Every lock (keys empty) or the given keys (a key never taken is reported free).
  /// Session-strategy holders are checked with the server: a dead holder shows free.
  virtual Result<std::vector<LockStatus>> status(std::span<const std::string> keys) = 0;

  /// Newest first; all keys when key is empty.
  virtual Result<std::vector<RunRecord>> history(const std::string& key, int limit) = 0;

  /// Lease renew from another process (`dblock renew`); ErrorKind::lost when not held by
  /// the selected holder. Returns the new expires_at (database time, ms).
  virtual Result<std::int64_t> renew(const std::string& key, const HolderSelector& who, Millis ttl) = 0;

  /// Lease release from another process (`dblock release`); ErrorKind::lost when not held
  /// by the selected holder (unless who.force).
  virtual Result<void> release(const std::string& key, const HolderSelector& who) = 0;

  /// The server's clock, in ms since the epoch (doctor's clock check, latency).
  virtual Result<std::int64_t> now_ms() = 0;

  /// Backend-specific checks: privileges, idle timeouts, Galera, PgBouncer, network fs...
  virtual std::vector<DoctorCheck> doctor_checks(Strategy strategy) = 0;
};

}  // namespace dblock

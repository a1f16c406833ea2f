#pragma once
// What a database backend offers besides the lock itself (core/locker.hpp): opening with
// options, the schema, status, history and the stateless renew/release of other processes.
// Core never sees this file; cli picks a backend from the registry and hands core a Locker.

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/lock_types.hpp"
#include "core/locker.hpp"

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
  // Inspection (status, history, doctor, check, metrics): open read-only and create nothing,
  // neither a file, a directory nor a table; a database without the tables is ErrorKind::other
  // saying so (no_lock_database in core/sql/schema.hpp). SQLite: SQLITE_OPEN_READONLY, no pragma
  // that writes; servers: no DDL.
  bool inspect = false;
  // The DSN is the default SQLite location (default_dsn): only there are missing directories
  // created (or, inspecting, taken as "nothing ran yet"); a DSN someone wrote that names a
  // missing directory is a typo until proven otherwise (ErrorKind::config naming it).
  bool create_directories = false;
  // With create_directories: the state directory the default location lives under
  // (DefaultLocation::state_dir). The file and every directory up to this one must be owned by
  // this user or root and writable by no one else, as ssh(1) asks of ~/.ssh; a DSN someone
  // wrote (empty here) is taken as they wrote it.
  std::string private_root;
  // --table-format shedlock (core/sql/shedlock.hpp): the lease lives in ShedLock's table, named
  // shedlock_table (already validated and not quoted); history and tokens stay in dblock's tables.
  bool shedlock = false;
  std::string shedlock_table = "shedlock";
  // The strategy the run path's make_locker will ask for (Context::locker_opener), known when
  // the backend opens: a backend may open the connections that locker needs at once, side by
  // side, rather than one after the other. nullopt: not known.
  std::optional<Strategy> locker_strategy;
};

/// What a connection is for: only the session that holds a session lock gets
/// session_idle_limit; every other connection keeps the server's idle killers off.
enum class ConnectionRole { bookkeeping, lock_holder };

/// One open database, for the administrative operations.
class Backend {
 public:
  virtual ~Backend() = default;

  /// "sqlite", "mysql", "postgres".
  virtual std::string_view name() const = 0;

  /// Creates <prefix>locks and <prefix>runs if missing; a table of the wrong shape is
  /// ErrorKind::config naming the missing column.
  virtual Result<void> ensure_schema() = 0;

  /// Read only (doctor): the tables exist with the expected columns. Missing tables are
  /// no_lock_database (ErrorKind::other); a table of the wrong shape is ErrorKind::config.
  virtual Result<void> check_schema() = 0;

  /// A locker for the strategy; ErrorKind::config with a sentence naming the strategies
  /// this backend can do when it cannot do this one.
  /// The run path calls no ensure_schema first: the locker assumes the tables exist and, when a
  /// statement reports one missing (native error code), creates the schema and retries once; a
  /// table of the wrong shape is still ErrorKind::config naming the column. The locker may take
  /// over this Backend's connection (a lease run uses one connection for everything); the
  /// Backend is not used after make_locker, only destroyed after the locker.
  virtual Result<std::unique_ptr<Locker>> make_locker(Strategy strategy) = 0;

  /// Every lock (keys empty) or the given keys (a key never taken is reported free).
  /// Session-strategy holders are checked with the server: a dead holder shows free.
  virtual Result<std::vector<LockStatus>> status(std::span<const std::string> keys) = 0;

  /// The slot count a semaphore's header row records (--slots, docs/backend-contract.md
  /// "Semaphores"); 0 when `key` is no semaphore.
  virtual Result<int> slot_count(const std::string& key) = 0;

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

  /// Backend-specific checks: privileges, idle timeouts, Galera, poolers, network fs...
  virtual std::vector<DoctorCheck> doctor_checks(Strategy strategy) = 0;
};

}  // namespace dblock

#pragma once
// Plain data passed between core and the backends. Times that come from the database are
// milliseconds since the Unix epoch on the *database server's* clock (dblock(1), NOTES: Database time).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dblock {

using Millis = std::chrono::milliseconds;

enum class Strategy { lease, advisory, for_update, txn_insert };

/// "lease", "advisory", "for-update", "txn-insert".
std::string_view to_string(Strategy s);
/// Parses the names above; nullopt for anything else.
std::optional<Strategy> parse_strategy(std::string_view text);
/// True for strategies whose lock lives in a database session (dies with the connection).
constexpr bool is_session_strategy(Strategy s) { return s != Strategy::lease; }

/// --min-interval's start tolerance (dblock(1), --min-interval): a start that comes this much
/// early still counts, so cron's jitter of a second or two never costs a whole period. A tenth
/// of the interval, at most 5 s: below any cron period an interval is a multiple of (a
/// minute), above the jitter of a loaded host.
constexpr Millis min_interval_tolerance(Millis interval) { return std::min(interval / 10, Millis(5000)); }

/// Who is asking for which lock, and on what terms.
struct LockRequest {
  std::string key;
  std::string owner;   // --owner, default host:pid:random
  std::string host;
  std::int64_t pid = 0;
  Millis ttl{30000};        // lease length; session strategies store it for display only
  // 0 = no check; else refuse (not_due) unless last_started_at <= now - min_interval. What the
  // user asked less min_interval_tolerance: the lockers compare with it as it is.
  Millis min_interval{0};
  // A slot of a semaphore (core/semaphore.hpp, docs/design.md "Semaphores"): `key` is
  // the slot's row, `semaphore` the key whose header row records `slots` and issues the token,
  // in the same transaction as the slot is taken. Empty `semaphore`: a plain lock.
  std::string semaphore;
  int slots = 0;
  // A plain lock's attempt that finds it held says who holds it (AcquireOutcome::holder) even
  // where that costs a statement of its own; false: only where the take's answer said it. Core's
  // wait loop asks again only now and then (acquire_loop.cpp), as a waiter whose server wait
  // ended with its slice would otherwise read the holder before each next slice: a round trip
  // in which a release finds nobody waiting in the server.
  bool describe_holder = true;
};

/// A failover lock-delay in force (dblock(1) GUARANTEES, "Failover lock-delay"): the database's
/// primary changed, and nothing is granted on it until until_ms (database time), when no holder
/// of a grant the old primary may have lost can still be inside its lease.
struct LockDelay {
  std::string failover;  // what changed: "failover from <incarnation> to <incarnation>"
  std::int64_t until_ms = 0;
  std::int64_t db_now_ms = 0;
};

/// What a holder looks like, as stored in <prefix>locks and judged by the server.
struct LockStatus {
  enum class State { held, free, expired };
  std::string key;
  State state = State::free;
  std::string owner;
  std::string host;
  std::int64_t pid = 0;
  std::int64_t token = 0;
  std::string strategy;                      // as stored, "" if never taken
  std::optional<std::int64_t> acquired_at_ms;
  std::optional<std::int64_t> renewed_at_ms;
  std::optional<std::int64_t> expires_at_ms; // lease only; session strategies: nullopt
  std::optional<std::int64_t> released_at_ms;
  std::optional<std::int64_t> last_started_at_ms;
  std::optional<std::int64_t> last_finished_at_ms;
  std::optional<int> last_exit_code;
  std::int64_t db_now_ms = 0;                // the server's clock when this row was read
  std::optional<LockDelay> lock_delay;       // the database's failover lock-delay in force, if any
};

std::string_view to_string(LockStatus::State s);

/// Result of one acquisition attempt (not an error: busy and not_due are normal answers).
struct AcquireOutcome {
  enum class State { acquired, busy, not_due };
  State state = State::busy;
  std::int64_t token = 0;              // acquired: the fencing token
  std::optional<std::int64_t> acquired_at_ms;
  std::optional<std::int64_t> expires_at_ms;  // acquired with lease: database time of expiry
  std::optional<LockStatus> holder;    // busy: the current holder, when the backend knows it cheaply
  std::optional<Millis> due_in;        // not_due: time until --min-interval has elapsed
  std::optional<LockDelay> lock_delay; // busy: a failover lock-delay grants nothing until it ends
  // Semaphore slot asked, nothing taken: the header records this other slot count.
  std::optional<int> recorded_slots;
  // Semaphore: the slot taken (0..slots-1), set by core's semaphore locker.
  std::optional<int> slot;
};

enum class RunOutcome { ok, failed, lost, killed, max_hold, signal };

/// "ok", "failed", "lost", "killed", "max-hold", "signal".
std::string_view to_string(RunOutcome o);
std::optional<RunOutcome> parse_run_outcome(std::string_view text);

/// One row of <prefix>runs.
struct RunRecord {
  std::int64_t id = 0;  // assigned by the database; ignored on insert
  std::string key;
  std::int64_t token = 0;
  std::string owner;
  std::string host;
  std::int64_t pid = 0;
  std::string strategy;
  std::int64_t started_at_ms = 0;              // on insert: ignored, the backend uses the lock's acquired_at
  std::optional<std::int64_t> finished_at_ms;  // on insert: ignored, the backend uses database now
  RunOutcome outcome = RunOutcome::ok;
  std::optional<int> exit_code;
};

/// The lock this process holds, as a backend remembers it between acquire and release.
struct HeldLock {
  std::string key;
  std::string owner;
  std::string host;
  std::int64_t pid = 0;
  std::int64_t token = 0;
};

/// The history row of a run under `held`: key, token and strategy come from the lock actually
/// held, whatever the caller filled in; owner, host and pid only where the caller left them empty.
/// still_held: false when release found the lock taken over, which makes the outcome `lost`
/// whatever the command did (the run was not exclusive to its end).
RunRecord complete_run_record(RunRecord run, const HeldLock& held, std::string_view strategy, bool still_held = true);

/// How to let go of a lock that this process holds.
struct ReleaseRequest {
  Millis min_hold{0};                 // keep the lock until acquired_at + min_hold (database time)
  bool finished_run = false;          // true from `run`: set last_finished_at and last_exit_code
  std::optional<int> exit_code;       // the command's exit status for last_exit_code
  std::optional<RunRecord> history;   // the run's history row; nullopt with --no-history
};

/// Which holder a stateless renew/release (from another process) refers to.
struct HolderSelector {
  std::optional<std::string> owner;
  std::optional<std::int64_t> token;
  bool force = false;  // release --force: whoever holds it
};

/// One line of `dblock doctor`.
struct DoctorCheck {
  std::string name;    // short label: "connect", "privileges", "clock", "wait_timeout", ...
  bool ok = true;
  std::string detail;  // one sentence an operator can act on
  bool warn = false;   // ok, but worth an operator's look (shown as WARN; the exit status stays 0)
};

}  // namespace dblock

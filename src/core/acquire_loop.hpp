#pragma once
// Waiting for a lock: repeated single attempts (Locker::try_acquire) with jittered backoff, a
// deadline on CLOCK_BOOTTIME, wake-ups from the backend (PostgreSQL NOTIFY) and signals
// that abort the wait. Shared by `run` and `acquire -w`. Within the wait, a database that
// cannot be reached (restarting, out of connections) is one more reason to try again later.
// Without a wait, a server that turns connections away (Error::overloaded: the start storm of
// a crontab line on every host at once) is still retried for a short while, --overload-retry.

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/locker.hpp"
#include "core/error.hpp"
#include "core/lock_types.hpp"
#include "core/signals.hpp"

namespace dblock {

struct WaitResult {
  AcquireOutcome outcome;
  int signal = 0;        // != 0: this signal aborted the wait (outcome is then not acquired)
  Millis sent_at{0};     // CLOCK_BOOTTIME when the last attempt was sent: a lease's local deadline base
  Millis replied_at{0};  // CLOCK_BOOTTIME when its reply arrived: the local start of --min-hold
  int attempts = 0;      // attempts that got an answer; more than one: the lock was waited for
  Millis waited{0};      // from the first attempt to the last reply
  std::optional<LockStatus> last_holder;  // who held it at the last attempt that found it held
  bool told_waiting = false;  // the terminal was told the wait started (log::progress), and how it ended
  std::string turned_away;    // not empty: no attempt got an answer, the server was overloaded throughout
};

/// Opens everything an attempt needs (the database, its tables, a locker of the strategy).
/// Called before the first attempt and again after each connection error, with the previous
/// locker already destroyed, so it may start from a fresh connection.
using OpenLocker = std::function<Result<std::unique_ptr<Locker>>()>;

/// A finished wait and the locker it used (the one that holds the lock when acquired).
struct Waited {
  WaitResult result;
  std::unique_ptr<Locker> locker;
};

/// --overload-retry when none is given: a few seconds, enough for a storm of a thousand
/// contenders on a server with 40 connections to drain.
inline constexpr Millis default_overload_retry{5000};

/// How long overloaded connection errors are retried: the --overload-retry asked for, never
/// past a third of the TTL (a run that starts later than that is late for its slot).
Millis overload_retry_for(Millis requested, Millis ttl);

/// Tries until acquired, the wait runs out (outcome busy/not_due), or SIGINT/SIGTERM/SIGHUP/
/// SIGQUIT/SIGUSR1/SIGUSR2 arrives. wait: nullopt = one attempt only; Millis::max() = forever.
/// ErrorKind::connection, from opening or from an attempt, is retried with backoff until the
/// wait runs out and then returned, naming the last error; an overloaded one (Error::overloaded)
/// also until `overload_retry` after the first attempt, with or without a wait, with full
/// jitter so a storm's retries spread out, and without a wait an overload that outlasts it is
/// a busy outcome (WaitResult::turned_away says why); every other error ends the wait at once. -v
/// explains each decision (log::verbose), a repeated error only once.
Result<Waited> acquire_with_wait(const OpenLocker& open, const LockRequest& request, std::optional<Millis> wait,
                                 SignalWatch& signals, Millis overload_retry = Millis{0});

/// The same with a locker the caller already made; after a connection error the next
/// attempt goes to the same locker, which reconnects by itself if its backend can.
Result<WaitResult> acquire_with_wait(Locker& locker, const LockRequest& request, std::optional<Millis> wait);

/// The same, reading signals from a watch the caller already holds (run keeps the signals
/// blocked from the wait through the end of the command, so none can slip in between).
Result<WaitResult> acquire_with_wait(Locker& locker, const LockRequest& request, std::optional<Millis> wait,
                                     SignalWatch& signals, Millis overload_retry = Millis{0});

/// One line for -v about who holds a lock: owner, host, pid, token, since, expires.
std::string describe_holder(const LockStatus& holder);

/// Why a not_due answer refused: "it ran less than --min-interval ago (last started
/// 2026-11-26T07:23:02.001Z on web1); due in 872ms", the parts the outcome knows.
std::string describe_not_due(const AcquireOutcome& out);

/// "blocked by the failover lock-delay (failover from A to B) until <UTC> (in <duration>)".
std::string describe_lock_delay(const LockDelay& delay);

/// Short, for a person at a terminal: "web1:4711 since 02:00:03 (lease, expires in 21s)"
/// (local time of day).
std::string holder_summary(const LockStatus& holder);

/// Short, for a person at a terminal: "the failover lock-delay (failover from A to B) until
/// 02:00:33 (in 30s)" (local time of day).
std::string lock_delay_summary(const LockDelay& delay);

/// UTC timestamp "2024-05-01T02:00:00.123Z" from ms since the epoch.
std::string format_utc_ms(std::int64_t ms);

}  // namespace dblock

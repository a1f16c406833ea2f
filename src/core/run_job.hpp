#pragma once
// `dblock run`: take the lock (waiting if asked), start the command in its own process
// group, keep the lock alive while it runs, stop it when the lock is lost or --max-hold
// expires, release on every path, and return the exit status dblock(1) EXIT STATUS lists.

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/locker.hpp"
#include "core/acquire_loop.hpp"
#include "core/error.hpp"
#include "core/lock_types.hpp"

namespace dblock {

struct RunOptions {
  LockRequest request;                 // key, owner, host, pid, ttl, min_interval
  Strategy strategy = Strategy::lease;
  std::optional<Millis> wait;          // nullopt: do not wait; Millis::max(): wait forever
  Millis overload_retry{0};            // --overload-retry (core caps it: overload_retry_for)
  int conflict_exit_code = 75;         // -E
  Millis min_hold{0};
  std::optional<Millis> max_hold;
  Millis kill_after{5000};
  bool terminate_on_lost = true;       // --on-lost terminate|ignore
  bool record_history = true;          // !--no-history
  std::vector<std::string> command;    // argv; for -c: {"/bin/sh", "-c", text}
  // What the command learns of the database, set by the caller: never the DSN text, which
  // is removed from the command's environment (DBLOCK_RUN_DATABASE, DBLOCK_DSN_FILE).
  std::vector<std::pair<std::string, std::string>> database_env;
};

/// Ok, or ErrorKind::usage naming values that would work: the heartbeat (every ttl/3) must
/// leave room for one retry plus the --kill-after grace before the lease can expire.
Result<void> validate_run_timing(Millis ttl, Millis kill_after);
/// The shortest TTL run accepts: a renew interval (ttl/3) must cover the safety margin even
/// with no kill grace. ErrorKind::usage naming the working value otherwise.
Result<void> validate_ttl(Millis ttl);
/// --kill-after when none is given: 5 s, shrunk to fit the TTL (whole seconds, at least 0), so
/// `--ttl 10s` alone just works.
Millis default_kill_after(Millis ttl);

/// Runs the whole job and returns the process exit status (the command's own, 75/-E, 76,
/// 124, 126, 127, 128+N, 69...). Errors are reported on stderr before returning. `open`
/// opens the database and a locker, again after a connection error while still waiting.
int run_job(const OpenLocker& open, const RunOptions& options);
/// The same, with the opener made only once the command's guard process is forked: making
/// it may load a server backend's module and client libraries, which then stay out of the
/// guard's address space, so the guard's spawn of the command is cheaper at every handoff.
/// An exception from make_open (a bad DSN) leaves after the guard was told nothing: it exits.
int run_job(const std::function<OpenLocker()>& make_open, const RunOptions& options);

}  // namespace dblock

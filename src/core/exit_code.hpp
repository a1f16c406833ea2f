#pragma once
// The one home of dblock's exit statuses (dblock(1), EXIT STATUS); scripts rely on these numbers.

#include "core/error.hpp"

namespace dblock {

enum ExitCode : int {
  exit_ok = 0,
  exit_free = 1,             // status -q KEY: the lock is free
  exit_usage = 64,           // EX_USAGE: bad option, duration, key
  exit_unavailable = 69,     // EX_UNAVAILABLE: database unreachable or a statement failed
  exit_internal = 70,        // EX_SOFTWARE
  exit_no_process = 71,      // EX_OSERR (as flock(1)): run: no process to start the command in (fork failed)
  exit_conflict = 75,        // EX_TEMPFAIL: lock not obtained (default of -E)
  exit_lost = 76,            // run: lock lost, command terminated
  exit_config = 78,          // EX_CONFIG: bad DSN, table shape, unsupported strategy
  exit_max_hold = 124,       // run: --max-hold expired (as timeout(1))
  exit_cannot_execute = 126, // as env(1)
  exit_not_found = 127,      // as env(1)
  exit_signal_base = 128,    // 128+N: died of signal N / interrupted by signal N
};

/// The exit status an error of this kind ends the process with.
constexpr int exit_code_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::busy:
    case ErrorKind::wait_ended: return exit_conflict;
    case ErrorKind::lost: return exit_lost;
    case ErrorKind::connection: return exit_unavailable;
    case ErrorKind::config:
    case ErrorKind::schema_missing:  // the setup's to fix, as a table of the wrong shape
    case ErrorKind::denied: return exit_config;
    case ErrorKind::no_session: return exit_unavailable;
    case ErrorKind::usage: return exit_usage;
    case ErrorKind::other: return exit_unavailable;
    case ErrorKind::internal: return exit_internal;
  }
  return exit_internal;
}

}  // namespace dblock

#pragma once
// Waiting for a lock: retries with backoff until acquired, the wait runs out, or a signal
// arrives. The one place that knows about deadlines while *waiting* (SPEC 5).

#include <optional>

#include "backends/backend.hpp"

namespace dblock {

struct WaitResult {
  AcquireOutcome outcome;
  int signal = 0;  // != 0: this signal aborted the wait (exit 128+N)
};

/// Tries until acquired, the wait runs out (outcome busy/not_due), or SIGINT, SIGTERM, SIGHUP,
/// SIGQUIT, SIGUSR1 or SIGUSR2 arrives. wait: nullopt = one attempt only; Millis::max() =
/// forever. -v explains each decision.
Result<WaitResult> acquire_with_wait(Locker& locker, const LockRequest& request, std::optional<Millis> wait);

}  // namespace dblock

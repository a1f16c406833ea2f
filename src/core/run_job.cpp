// Placeholder until the run engine lands (branch run).
#include "core/acquire_loop.hpp"
#include "core/run_job.hpp"

namespace dblock {

Result<void> validate_run_timing(Millis, Millis) { return {}; }

int run_job(Backend&, const RunOptions&) { return 70; }

Result<WaitResult> acquire_with_wait(Locker& locker, const LockRequest& request, std::optional<Millis>) {
  auto outcome = locker.try_acquire(request, Millis(0));
  if (!outcome) return std::unexpected(outcome.error());
  return WaitResult{*outcome, 0};
}

}  // namespace dblock

// dblock acquire KEY [--ttl D] [--owner ID] [-w [D]]: a lease for shell scripts; prints the token.

#include <unistd.h>

#include <iostream>

#include "cli/commands.hpp"
#include "cli/holder_options.hpp"
#include "core/acquire_loop.hpp"
#include "core/duration.hpp"
#include "core/exit_code.hpp"
#include "core/log.hpp"

namespace dblock::cli {
namespace {

struct AcquireArgs {
  std::string key;
  std::string ttl = "30s";
  std::string owner;
  std::vector<std::string> wait;
  std::string overload_retry;
  int conflict_exit_code = exit_conflict;
  int slots = 0;
};

}  // namespace

CommandAction define_acquire(CLI::App& sub) {
  auto args = std::make_shared<AcquireArgs>();
  add_key(sub, args->key);
  add_duration(sub, "--ttl", args->ttl, "Lease length (renew it with dblock renew)")->capture_default_str();
  add_owner(sub, args->owner, "Holder identity (default host:pid:random)");
  auto* wait = add_wait(sub, args->wait);
  add_overload_retry(sub, args->overload_retry);
  add_slots(sub, args->slots);
  sub.add_option("-E,--conflict-exit-code", args->conflict_exit_code, "Exit status when the lock is not obtained")
      ->check(whole_number(0, 255))
      ->capture_default_str();

  return [args, wait](Context& context) -> int {
    require_lease(context, "acquire");
    LockRequest request;
    request.key = args->key;
    request.owner = args->owner.empty() ? default_owner() : args->owner;
    request.host = host_name();
    request.pid = getpid();
    request.ttl = duration_option("--ttl", args->ttl);
    if (request.ttl < Millis(1000)) throw FatalError{{ErrorKind::usage, "--ttl must be at least 1s"}};
    apply_slots(request, args->slots);
    SignalWatch signals;
    Waited waited =
        value_or_throw(acquire_with_wait(context.locker_opener(Strategy::lease, request.ttl, request.slots), request,
                                         resolve_wait(*wait, args->wait), signals,
                                         overload_retry_for(duration_option("--overload-retry", args->overload_retry),
                                                            request.ttl)));
    const WaitResult& result = waited.result;
    if (result.signal) return exit_signal_base + result.signal;
    if (result.outcome.state != AcquireOutcome::State::acquired) return args->conflict_exit_code;
    std::string slot;
    if (result.outcome.slot) slot = " (slot " + std::to_string(*result.outcome.slot) + ")";
    log::verbose("acquired " + request.key + slot + " as " + request.owner + " with token " +
                 std::to_string(result.outcome.token) + " for " + format_duration(request.ttl));
    std::cout << result.outcome.token << std::endl;
    return exit_ok;
  };
}

}  // namespace dblock::cli

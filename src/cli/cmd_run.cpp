// dblock run KEY [options] -- COMMAND [ARG...] | -c 'shell command'

#include <unistd.h>

#include <limits>

#include "cli/commands.hpp"
#include "core/duration.hpp"
#include "core/event_log.hpp"
#include "core/exit_code.hpp"
#include "core/log.hpp"
#include "core/run_job.hpp"

namespace dblock::cli {
namespace {

struct RunArgs {
  std::string key;
  bool nonblock = false;
  std::vector<std::string> wait;  // -w without a value: forever
  std::string overload_retry;
  int conflict_exit_code = exit_conflict;
  std::string ttl = "30s";
  std::string min_hold = "0";
  std::string min_interval = "0";
  std::string max_hold;
  std::string kill_after;  // empty: default_kill_after(ttl)
  std::string on_lost = "terminate";
  std::string owner;
  bool no_history = false;
  std::string shell_command;
  std::vector<std::string> command;
  int slots = 0;
};

}  // namespace

CommandAction define_run(CLI::App& sub) {
  auto args = std::make_shared<RunArgs>();
  add_key(sub, args->key);
  auto* nonblock = sub.add_flag("-n,--nonblock", args->nonblock, "Do not wait if the lock is held (the default)");
  auto* wait = add_wait(sub, args->wait)->excludes(nonblock);
  add_overload_retry(sub, args->overload_retry);
  sub.add_option("-E,--conflict-exit-code", args->conflict_exit_code,
                 "Exit status when the lock is not obtained (0 = a skip is a success)")
      ->check(whole_number(0, 255))
      ->capture_default_str();
  add_duration(sub, "--ttl", args->ttl, "Lease length; renewed every TTL/3 while the command runs")->capture_default_str();
  add_duration(sub, "--min-hold", args->min_hold, "Keep the lock at least D after the start")->capture_default_str();
  add_duration(sub, "--min-interval", args->min_interval,
               "Do not start unless the last start of KEY on any host was at least D ago")
      ->capture_default_str();
  add_slots(sub, args->slots);
  add_duration(sub, "--max-hold", args->max_hold, "Terminate the command after D (exit 124; 0 = no limit)");
  add_duration(sub, "--kill-after", args->kill_after,
               "Grace between SIGTERM and SIGKILL (default 5s, less when --ttl is short: at most ttl/3 - 1s)");
  sub.add_option("--on-lost", args->on_lost, "terminate or ignore: what to do when the lock is lost")
      ->check(CLI::IsMember({"terminate", "ignore"}))
      ->capture_default_str();
  add_owner(sub, args->owner, "Holder identity stored in the table (default host:pid:random)");
  sub.add_flag("--no-history", args->no_history, "Do not record this run in the runs table");
  auto* shell = sub.add_option("-c,--command", args->shell_command, "Run this with /bin/sh -c");
  sub.add_option("command", args->command, "The command and its arguments, after --")->excludes(shell);

  return [args, wait](Context& context) -> int {
    event_log::set_key(args->key);  // the option errors below are --log events of this key too
    RunOptions options;
    options.command = args->command;
    options.command.insert(options.command.end(), context.command_after_dashes.begin(),
                           context.command_after_dashes.end());
    if (!args->shell_command.empty()) {
      if (!options.command.empty())
        throw FatalError{{ErrorKind::usage, "run: give either -c 'shell command' or -- COMMAND [ARG...], not both"}};
      options.command = {"/bin/sh", "-c", args->shell_command};
    }
    if (options.command.empty())
      throw FatalError{{ErrorKind::usage, "run: no command given (dblock run KEY -- COMMAND [ARG...] or -c 'command')"}};

    options.strategy = context.strategy();
    options.request.key = args->key;
    options.request.owner = args->owner.empty() ? default_owner() : args->owner;
    options.request.host = host_name();
    options.request.pid = getpid();
    options.request.ttl = duration_option("--ttl", args->ttl);
    const Millis min_interval = duration_option("--min-interval", args->min_interval);
    options.request.min_interval = min_interval - min_interval_tolerance(min_interval);
    value_or_throw(validate_ttl(options.request.ttl));
    apply_slots(options.request, args->slots);
    options.wait = resolve_wait(*wait, args->wait);
    options.overload_retry = duration_option("--overload-retry", args->overload_retry);
    options.conflict_exit_code = args->conflict_exit_code;
    options.min_hold = duration_option("--min-hold", args->min_hold);
    // --max-hold 0 is no limit, as timeout(1)'s 0.
    if (!args->max_hold.empty())
      if (Millis d = duration_option("--max-hold", args->max_hold); d > Millis(0)) options.max_hold = d;
    options.kill_after = args->kill_after.empty() ? default_kill_after(options.request.ttl)
                                                  : duration_option("--kill-after", args->kill_after);
    log::verbose("--kill-after " + format_duration(options.kill_after));
    options.terminate_on_lost = args->on_lost == "terminate";
    options.record_history = !args->no_history;
    value_or_throw(validate_run_timing(options.request.ttl, options.kill_after));

    // The DSN is read now, as the command's environment is fixed when the guard is forked; it
    // is parsed, and a server backend's module loaded, only after.
    options.database_env = context.database_env_for_command();
    return run_job([&] { return context.locker_opener(options.strategy, options.request.ttl, options.request.slots); },
                   options);
  };
}

}  // namespace dblock::cli

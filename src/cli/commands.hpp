#pragma once
// The subcommand table is data: app.cpp walks it to build the CLI11 app, so
// help text and dispatch cannot drift apart.

#include <CLI/CLI.hpp>
#include <functional>
#include <span>
#include <string_view>

#include "cli/context.hpp"

namespace dblock::cli {

/// Runs a parsed subcommand and returns the process exit status.
using CommandAction = std::function<int(Context&)>;

struct Command {
  std::string_view name;
  std::string_view summary;
  /// Declares the subcommand's options and positionals on `sub`; returns its action.
  CommandAction (*define)(CLI::App& sub);
};

/// Every subcommand, in the order `--help` lists them.
std::span<const Command> commands();

CommandAction define_run(CLI::App& sub);
CommandAction define_acquire(CLI::App& sub);
CommandAction define_renew(CLI::App& sub);
CommandAction define_release(CLI::App& sub);
CommandAction define_status(CLI::App& sub);
CommandAction define_history(CLI::App& sub);
CommandAction define_init(CLI::App& sub);
CommandAction define_schema(CLI::App& sub);
CommandAction define_doctor(CLI::App& sub);
CommandAction define_check(CLI::App& sub);
CommandAction define_metrics(CLI::App& sub);

/// The exit status of a command line that failed before its action ran: `usual`, except for
/// `check`, which answers as a monitoring plugin (one UNKNOWN line on stdout, exit 3).
int failure_exit_status(const CLI::App& app, int usual, const std::string& message);

/// Adds the positional KEY, validated as dblock(1) OPTIONS says (exit 64 naming the problem).
CLI::Option* add_key(CLI::App& sub, std::string& key);
/// Adds --owner ID, validated as a key is (exit 64 naming the problem).
CLI::Option* add_owner(CLI::App& sub, std::string& owner, const std::string& help);
/// Adds a duration option validated at parse time (exit 64 naming the option).
CLI::Option* add_duration(CLI::App& sub, const std::string& names, std::string& value, const std::string& help);

/// A validator for an integer option, in plain words: "'x' is not a whole number from 1 to
/// 1000000" (or "... is not a fencing token ..." with `what`), instead of CLI11's range text.
CLI::Validator whole_number(std::int64_t min, std::int64_t max, const std::string& what = "whole number");

/// Adds --slots N (a semaphore of N holders, core/semaphore.hpp); 0 when not given.
CLI::Option* add_slots(CLI::App& sub, int& slots);
/// A request's slots after the key is known: usage errors for a key too long for its slot rows.
void apply_slots(LockRequest& request, int slots);

/// Adds -w/--wait [D] (optional value, as flock(1)).
CLI::Option* add_wait(CLI::App& sub, std::vector<std::string>& value);
/// What -w asked for: nullopt = do not wait (absent, or -w 0); Millis::max() = forever.
std::optional<Millis> resolve_wait(const CLI::Option& option, const std::vector<std::string>& value);
/// Adds --overload-retry D (default core's default_overload_retry; 0 = off).
CLI::Option* add_overload_retry(CLI::App& sub, std::string& value);

}  // namespace dblock::cli

#include "core/lock_types.hpp"

#include <array>
#include <utility>

#include "core/semaphore.hpp"

namespace dblock {
namespace {

constexpr std::array<std::pair<Strategy, std::string_view>, 4> strategy_names{{
    {Strategy::lease, "lease"},
    {Strategy::advisory, "advisory"},
    {Strategy::for_update, "for-update"},
    {Strategy::txn_insert, "txn-insert"},
}};

constexpr std::array<std::pair<RunOutcome, std::string_view>, 6> outcome_names{{
    {RunOutcome::ok, "ok"},
    {RunOutcome::failed, "failed"},
    {RunOutcome::lost, "lost"},
    {RunOutcome::killed, "killed"},
    {RunOutcome::max_hold, "max-hold"},
    {RunOutcome::signal, "signal"},
}};

}  // namespace

std::string_view to_string(Strategy s) {
  for (const auto& [value, name] : strategy_names)
    if (value == s) return name;
  return "?";
}

std::optional<Strategy> parse_strategy(std::string_view text) {
  for (const auto& [value, name] : strategy_names)
    if (name == text) return value;
  return std::nullopt;
}

std::string_view to_string(LockStatus::State s) {
  switch (s) {
    case LockStatus::State::held: return "held";
    case LockStatus::State::free: return "free";
    case LockStatus::State::expired: return "expired";
  }
  return "?";
}

std::string_view to_string(RunOutcome o) {
  for (const auto& [value, name] : outcome_names)
    if (value == o) return name;
  return "?";
}

RunRecord complete_run_record(RunRecord run, const HeldLock& held, std::string_view strategy, bool still_held) {
  if (!still_held) run.outcome = RunOutcome::lost;
  run.key = std::string(key_of_row(held.key));  // a semaphore's runs are its key's history
  run.token = held.token;
  run.strategy = std::string(strategy);
  if (run.owner.empty()) run.owner = held.owner;
  if (run.host.empty()) run.host = held.host;
  if (run.pid == 0) run.pid = held.pid;
  return run;
}

std::optional<RunOutcome> parse_run_outcome(std::string_view text) {
  for (const auto& [value, name] : outcome_names)
    if (name == text) return value;
  return std::nullopt;
}

}  // namespace dblock

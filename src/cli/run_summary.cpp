#include "cli/run_summary.hpp"

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>

#include "cli/context.hpp"
#include "cli/semaphore_view.hpp"

namespace dblock::cli {
namespace {

std::size_t outcome_index(RunOutcome outcome) {
  return static_cast<std::size_t>(std::find(all_outcomes.begin(), all_outcomes.end(), outcome) - all_outcomes.begin());
}

// `runs` newest first, all of one key.
void add_history(KeySummary& summary, const std::vector<const RunRecord*>& runs) {
  for (const RunRecord* run : runs) {
    summary.runs[outcome_index(run->outcome)]++;
    if (!summary.last_success_ms && run->outcome == RunOutcome::ok) summary.last_success_ms = run->finished_at_ms;
  }
  if (!runs.empty()) {
    summary.last_outcome = runs.front()->outcome;
    summary.last_exit_code = runs.front()->exit_code;
    summary.last_finished_ms = runs.front()->finished_at_ms;
  }
  const LockStatus& lock = summary.lock;
  bool row_is_newer = lock.last_finished_at_ms && (!summary.last_finished_ms || *lock.last_finished_at_ms > *summary.last_finished_ms);
  if (row_is_newer) {
    summary.last_finished_ms = lock.last_finished_at_ms;
    summary.last_exit_code = lock.last_exit_code;
    bool ok = lock.last_exit_code == 0;
    summary.last_outcome = ok ? RunOutcome::ok : RunOutcome::failed;
    if (ok) summary.last_success_ms = lock.last_finished_at_ms;
  }
}

}  // namespace

std::vector<KeySummary> summarize(Backend& backend, std::span<const std::string> keys) {
  auto locks = value_or_throw(backend.status(keys));
  // The history table keeps at most --history-keep runs per key, so reading it all is bounded.
  constexpr int everything = std::numeric_limits<int>::max();
  // Keys named: one indexed query each; every key: one query for the whole table.
  std::vector<RunRecord> runs;
  if (keys.empty()) runs = value_or_throw(backend.history("", everything));
  for (const auto& key : keys) {
    auto of_key = value_or_throw(backend.history(key, everything));
    std::move(of_key.begin(), of_key.end(), std::back_inserter(runs));
  }
  std::map<std::string, std::vector<const RunRecord*>, std::less<>> by_key;
  for (const auto& run : runs) by_key[run.key].push_back(&run);

  std::vector<KeySummary> summaries;
  for (auto& lock : locks) {
    // A semaphore is one key here: its slots' rows fold into its header's.
    if (is_slot_row(lock)) continue;
    KeySummary summary;
    summary.lock = is_semaphore_header(lock) ? as_one_lock(lock, read_slots(backend, lock.key)) : std::move(lock);
    auto it = by_key.find(summary.lock.key);
    add_history(summary, it == by_key.end() ? std::vector<const RunRecord*>{} : it->second);
    summaries.push_back(std::move(summary));
  }
  return summaries;
}

}  // namespace dblock::cli

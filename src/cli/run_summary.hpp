#pragma once
// What check and metrics report about a key: its lock row plus what its retained history says
// (the last finished run, the last success, runs by outcome), read in one status and one
// history query.

#include <array>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/backend.hpp"

namespace dblock::cli {

inline constexpr std::array<RunOutcome, 6> all_outcomes{RunOutcome::ok,     RunOutcome::failed,   RunOutcome::lost,
                                                        RunOutcome::killed, RunOutcome::max_hold, RunOutcome::signal};

struct KeySummary {
  LockStatus lock;
  /// The newest finished run: from history, or from the lock row's last_finished_at and
  /// last_exit_code when that is newer (a --no-history run writes no history row).
  std::optional<RunOutcome> last_outcome;
  std::optional<int> last_exit_code;
  std::optional<std::int64_t> last_finished_ms;
  /// When the newest successful run finished (database clock).
  std::optional<std::int64_t> last_success_ms;
  /// Runs in the retained history (the newest --history-keep per key), by all_outcomes' order.
  std::array<std::int64_t, all_outcomes.size()> runs{};
};

/// Every lock (keys empty) or the keys given (each once), in status order.
std::vector<KeySummary> summarize(Backend& backend, std::span<const std::string> keys);

}  // namespace dblock::cli

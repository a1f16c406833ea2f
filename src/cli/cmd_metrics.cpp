// dblock metrics [KEY...]: the Prometheus text exposition format, for node_exporter's textfile
// collector (dblock metrics >dir/dblock.prom.$$ && mv dir/dblock.prom.$$ dir/dblock.prom).
// Samples of one metric stand together under their HELP and TYPE lines, as the format asks.

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/run_summary.hpp"
#include "core/exit_code.hpp"
#include "core/key.hpp"

namespace dblock::cli {
namespace {

struct MetricsArgs {
  std::vector<std::string> keys;
};

// A label value: backslash, double quote and line feed escaped, as the format asks.
std::string label_value(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string epoch_seconds(std::int64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ms) / 1000.0);
  return buf;
}

using Sample = std::function<std::optional<std::string>(const KeySummary&)>;

void family(std::string& out, const std::vector<KeySummary>& keys, const std::string& name, const std::string& help,
            const Sample& sample) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n";
  for (const auto& key : keys)
    if (auto value = sample(key)) out += name + "{key=\"" + label_value(key.lock.key) + "\"} " + *value + "\n";
}

std::optional<std::string> timestamp(std::optional<std::int64_t> ms) {
  if (!ms) return std::nullopt;
  return epoch_seconds(*ms);
}

std::string exposition(const std::vector<KeySummary>& keys) {
  std::string out;
  family(out, keys, "dblock_lock_held", "1 when the lock is held now, else 0.",
         [](const KeySummary& k) { return std::string(k.lock.state == LockStatus::State::held ? "1" : "0"); });
  family(out, keys, "dblock_lock_holder_age_seconds", "How long the current holder has held the lock (0 when not held).",
         [](const KeySummary& k) {
           bool held = k.lock.state == LockStatus::State::held && k.lock.acquired_at_ms;
           return epoch_seconds(held ? std::max<std::int64_t>(0, k.lock.db_now_ms - *k.lock.acquired_at_ms) : 0);
         });
  family(out, keys, "dblock_lock_token", "The fencing token last issued for the key.",
         [](const KeySummary& k) { return std::to_string(k.lock.token); });
  family(out, keys, "dblock_last_start_timestamp_seconds", "When the last run started (database clock, Unix time).",
         [](const KeySummary& k) { return timestamp(k.lock.last_started_at_ms); });
  family(out, keys, "dblock_last_finish_timestamp_seconds", "When the last run finished (database clock, Unix time).",
         [](const KeySummary& k) { return timestamp(k.last_finished_ms); });
  family(out, keys, "dblock_last_success_timestamp_seconds",
         "When the last successful run finished (database clock, Unix time).",
         [](const KeySummary& k) { return timestamp(k.last_success_ms); });
  family(out, keys, "dblock_last_exit_code", "The exit status of the last finished run.", [](const KeySummary& k) {
    return k.last_exit_code ? std::optional(std::to_string(*k.last_exit_code)) : std::nullopt;
  });
  // A gauge, not a counter: pruning to --history-keep makes the count go down.
  std::string name = "dblock_runs";
  out += "# HELP " + name + " Runs in the retained history (the newest --history-keep per key), by outcome.\n";
  out += "# TYPE " + name + " gauge\n";
  for (const auto& key : keys)
    for (std::size_t i = 0; i < all_outcomes.size(); ++i)
      out += name + "{key=\"" + label_value(key.lock.key) + "\",outcome=\"" + std::string(to_string(all_outcomes[i])) +
             "\"} " + std::to_string(key.runs[i]) + "\n";
  return out;
}

}  // namespace

CommandAction define_metrics(CLI::App& sub) {
  auto args = std::make_shared<MetricsArgs>();
  sub.add_option("key", args->keys, "Only these keys (default: every lock)")->check([](const std::string& key) {
    auto ok = validate_key(key);
    return ok ? std::string() : ok.error().message;
  });
  return [args](Context& context) -> int {
    // A sample may appear once: a key named twice is reported once.
    std::vector<std::string> keys;
    for (const auto& key : args->keys)
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    auto backend = context.open_for_inspection();
    // Nothing reaches stdout unless every query succeeded: a half-written file would be read
    // as the truth by the collector.
    std::string text = exposition(summarize(*backend, keys));
    std::cout << text << std::flush;
    return exit_ok;
  };
}

}  // namespace dblock::cli

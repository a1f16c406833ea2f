// dblock history [KEY] [--limit N] [--json | -o COLUMNS [--raw] [-n]]

#include <algorithm>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "core/duration.hpp"
#include "core/exit_code.hpp"
#include "core/key.hpp"

namespace dblock::cli {
namespace {

struct HistoryArgs {
  std::string key;
  int limit = 20;
  bool json = false;
  TableOptions table;
};

// dblock(1) lists these under history; the action fills them in this order.
constexpr ColumnSpec history_columns[] = {
    {"STARTED", "when the run started"},
    {"KEY", "lock name"},
    {"HOST", "where it ran"},
    {"PID", "dblock's pid", true, true},
    {"OWNER", "the holder's owner"},
    {"TOKEN", "the run's fencing token", true, true},
    {"DURATION", "how long it ran", true, true},
    {"OUTCOME", "ok, failed, lost, killed, max-hold or signal"},
    {"EXIT", "the command's exit status", true, true},
    {"FINISHED", "when the run finished", false},
    {"STRATEGY", "the strategy it held the lock with", false},
    {"ID", "the row's id in <prefix>runs", false, true},
};

std::optional<std::int64_t> duration_ms(const RunRecord& r) {
  if (!r.finished_at_ms) return std::nullopt;
  return *r.finished_at_ms - r.started_at_ms;
}

nlohmann::json to_json(const RunRecord& r) {
  auto took = duration_ms(r);
  return {
      {"id", r.id},
      {"key", r.key},
      {"token", r.token},
      {"owner", r.owner},
      {"host", r.host},
      {"pid", r.pid},
      {"strategy", r.strategy},
      {"started_at", json_timestamp(r.started_at_ms)},
      {"finished_at", json_timestamp(r.finished_at_ms)},
      {"duration_ms", took ? nlohmann::json(*took) : nlohmann::json(nullptr)},
      {"outcome", std::string(to_string(r.outcome))},
      {"exit_code", r.exit_code ? nlohmann::json(*r.exit_code) : nlohmann::json(nullptr)},
  };
}

}  // namespace

CommandAction define_history(CLI::App& sub) {
  auto args = std::make_shared<HistoryArgs>();
  sub.add_option("key", args->key, "Only runs of this key")->check([](const std::string& key) {
    auto ok = validate_key(key);
    return ok ? std::string() : ok.error().message;
  });
  sub.add_option("--limit", args->limit, "Show at most N runs, newest first")
      ->check(whole_number(1, 1000000))
      ->capture_default_str();
  sub.add_flag("-J,--json", args->json, "One JSON document (fields in dblock(1))");
  add_table_options(sub, args->table, history_columns);
  return [args](Context& context) -> int {
    auto backend = context.open_for_inspection();
    auto runs = value_or_throw(backend->history(args->key, args->limit));
    // The backends pick the newest rows by insertion (their index); a run inserted later may
    // have started earlier on another host or a moment before, so the order is the start's.
    std::stable_sort(runs.begin(), runs.end(), [](const RunRecord& a, const RunRecord& b) {
      return a.started_at_ms != b.started_at_ms ? a.started_at_ms > b.started_at_ms : a.id > b.id;
    });
    if (args->json) {
      nlohmann::json doc = {{"runs", nlohmann::json::array()}};
      for (const auto& run : runs) doc["runs"].push_back(to_json(run));
      print_json(doc);
      return exit_ok;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& r : runs) {
      auto took = duration_ms(r);
      rows.push_back({format_timestamp(r.started_at_ms), r.key, r.host, std::to_string(r.pid), r.owner,
                      std::to_string(r.token), took ? format_duration(Millis(*took)) : "",
                      std::string(to_string(r.outcome)), r.exit_code ? std::to_string(*r.exit_code) : "",
                      r.finished_at_ms ? format_timestamp(r.finished_at_ms) : "", r.strategy, std::to_string(r.id)});
    }
    print_table(history_columns, args->table, rows);
    return exit_ok;
  };
}

}  // namespace dblock::cli

// dblock check KEY --max-age D [--warn-age D]: a monitoring plugin (Nagios, Icinga, Sensu,
// systemd ExecCondition). Follows the monitoring-plugins conventions: exit 0 OK, 1 WARNING,
// 2 CRITICAL, 3 UNKNOWN, and one line "DBLOCK STATE - text | perfdata" on stdout.

#include <cstdio>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/run_summary.hpp"
#include "core/duration.hpp"
#include "core/exit_code.hpp"
#include "core/text.hpp"

namespace dblock::cli {
namespace {

enum PluginState { plugin_ok = 0, plugin_warning = 1, plugin_critical = 2, plugin_unknown = 3 };

constexpr const char* state_names[] = {"OK", "WARNING", "CRITICAL", "UNKNOWN"};

struct CheckArgs {
  std::string key;
  std::string max_age;
  std::string warn_age;
};

// The text may quote a key, an owner or a driver's message: a '|' in it would start the
// perfdata, and a newline the plugin's long output, so both are escaped with the controls.
int report(PluginState state, const std::string& text, const std::string& perfdata = "") {
  std::string line = "DBLOCK ";
  line += state_names[state];
  line += " - ";
  line += escape_controls(text, "|");
  if (!perfdata.empty()) {
    line += " | ";
    line += perfdata;
  }
  std::cout << line << std::endl;
  return state;
}

std::string seconds(std::int64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ms) / 1000.0);
  return buf;
}

std::string ago(std::int64_t now_ms, std::int64_t then_ms) {
  return format_duration(Millis(std::max<std::int64_t>(0, now_ms - then_ms))) + " ago";
}

// Performance data, 'label'=value[UOM];[warn];[crit];[min];[max] as the guidelines give it:
// the age of the last success against the two thresholds, the last exit status, the runs.
std::string perfdata(const KeySummary& s, Millis max_age, std::optional<Millis> warn_age) {
  std::string out;
  if (s.last_success_ms) {
    out += "last_success_age=" + seconds(std::max<std::int64_t>(0, s.lock.db_now_ms - *s.last_success_ms)) + "s;";
    if (warn_age) out += seconds(warn_age->count());
    out += ";" + seconds(max_age.count()) + ";0 ";
  }
  if (s.last_exit_code) out += "last_exit=" + std::to_string(*s.last_exit_code) + " ";
  out += "held=" + std::string(s.lock.state == LockStatus::State::held ? "1" : "0");
  for (std::size_t i = 0; i < all_outcomes.size(); ++i) {
    std::string name(to_string(all_outcomes[i]));
    std::replace(name.begin(), name.end(), '-', '_');
    out += " runs_" + name + "=" + std::to_string(s.runs[i]);
  }
  return out;
}

int judge(const KeySummary& s, Millis max_age, std::optional<Millis> warn_age) {
  const std::string& key = s.lock.key;
  std::int64_t now = s.lock.db_now_ms;
  std::string perf = perfdata(s, max_age, warn_age);
  std::string running;
  if (s.lock.state == LockStatus::State::held && s.lock.acquired_at_ms)
    running = "; running for " + format_duration(Millis(std::max<std::int64_t>(0, now - *s.lock.acquired_at_ms)));

  if (!s.last_outcome) return report(plugin_critical, key + ": never ran" + running, perf);
  if (*s.last_outcome != RunOutcome::ok) {
    std::string text = key + ": last run " + std::string(to_string(*s.last_outcome));
    if (s.last_exit_code) text += " (exit " + std::to_string(*s.last_exit_code) + ")";
    if (s.last_finished_ms) text += " " + ago(now, *s.last_finished_ms);
    return report(plugin_critical, text + running, perf);
  }
  std::int64_t age = now - s.last_success_ms.value_or(now);
  std::string text = key + ": last success " + ago(now, now - age);
  if (age > max_age.count())
    return report(plugin_critical, text + ", older than --max-age " + format_duration(max_age) + running, perf);
  if (warn_age && age > warn_age->count())
    return report(plugin_warning, text + ", older than --warn-age " + format_duration(*warn_age) + running, perf);
  return report(plugin_ok, text + running, perf);
}

}  // namespace

int failure_exit_status(const CLI::App& app, int usual, const std::string& message) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App* s) { return s->get_name() == "check"; }))
    if (sub->count() > 0) return report(plugin_unknown, message);
  return usual;
}

CommandAction define_check(CLI::App& sub) {
  auto args = std::make_shared<CheckArgs>();
  add_key(sub, args->key);
  add_duration(sub, "--max-age", args->max_age, "CRITICAL when the last successful run finished longer ago than D")
      ->required();
  add_duration(sub, "--warn-age", args->warn_age, "WARNING when it finished longer ago than D");
  return [args](Context& context) -> int {
    try {
      Millis max_age = duration_option("--max-age", args->max_age);
      std::optional<Millis> warn_age;
      if (!args->warn_age.empty()) warn_age = duration_option("--warn-age", args->warn_age);
      if (warn_age && *warn_age > max_age) return report(plugin_unknown, "--warn-age is longer than --max-age");
      auto backend = context.open_for_inspection();
      std::vector<std::string> keys{args->key};
      auto summaries = summarize(*backend, keys);
      if (summaries.size() != 1) return report(plugin_unknown, args->key + ": the database returned no status");
      return judge(summaries.front(), max_age, warn_age);
    } catch (const FatalError& e) {
      return report(plugin_unknown, e.error.message);
    }
  };
}

}  // namespace dblock::cli

// dblock status [KEY...] [--json | -o COLUMNS [--raw] [-n]] [-q]

#include <iostream>
#include <map>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "cli/semaphore_view.hpp"
#include "core/acquire_loop.hpp"
#include "core/duration.hpp"
#include "core/exit_code.hpp"
#include "core/key.hpp"
#include "core/log.hpp"

namespace dblock::cli {
namespace {

struct StatusArgs {
  std::vector<std::string> keys;
  bool json = false;
  TableOptions table;
};

// dblock(1) lists these under status; to_row() fills them in this order.
constexpr ColumnSpec status_columns[] = {
    {"KEY", "lock name"},
    {"SLOT", "a semaphore's slot, as SLOT/SLOTS (--slots); empty for a plain lock"},
    {"STATE", "held, free or expired"},
    {"OWNER", "the holder's owner (empty when free)"},
    {"HOST", "the holder's host"},
    {"PID", "the holder's pid", true, true},
    {"TOKEN", "the fencing token last issued", true, true},
    {"SINCE", "when the holder acquired the lock"},
    {"AGE", "how long the holder has held it (running for)", true, true},
    {"EXPIRES-IN", "time left on the lease", true, true},
    {"STRATEGY", "the holder's strategy"},
    {"RENEWED", "when the lease was last renewed", false},
    {"RELEASED", "when the lock was last released", false},
    {"LAST-START", "when the last run started"},
    {"LAST-FINISH", "when the last run finished", false},
    {"LAST-EXIT", "the last run's exit status", true, true},
};

std::optional<std::int64_t> expires_in_ms(const LockStatus& s) {
  if (!s.expires_at_ms || s.state != LockStatus::State::held) return std::nullopt;
  return *s.expires_at_ms - s.db_now_ms;
}

// One line of status: a plain lock, or one slot of a semaphore.
struct Line {
  LockStatus lock;
  std::optional<int> slot;
  int slots = 0;
};

nlohmann::json to_json(const Line& line) {
  const LockStatus& s = line.lock;
  auto expires_in = expires_in_ms(s);
  return {
      {"key", s.key},
      {"slot", line.slot ? nlohmann::json(*line.slot) : nlohmann::json(nullptr)},
      {"slots", line.slot ? nlohmann::json(line.slots) : nlohmann::json(nullptr)},
      {"state", std::string(to_string(s.state))},
      {"owner", s.owner.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.owner)},
      {"host", s.host.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.host)},
      {"pid", s.pid ? nlohmann::json(s.pid) : nlohmann::json(nullptr)},
      {"token", s.token},
      {"strategy", s.strategy.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.strategy)},
      {"acquired_at", json_timestamp(s.acquired_at_ms)},
      {"renewed_at", json_timestamp(s.renewed_at_ms)},
      {"expires_at", json_timestamp(s.expires_at_ms)},
      {"expires_in_ms", expires_in ? nlohmann::json(*expires_in) : nlohmann::json(nullptr)},
      {"released_at", json_timestamp(s.released_at_ms)},
      {"last_started_at", json_timestamp(s.last_started_at_ms)},
      {"last_finished_at", json_timestamp(s.last_finished_at_ms)},
      {"last_exit_code", s.last_exit_code ? nlohmann::json(*s.last_exit_code) : nlohmann::json(nullptr)},
      {"lock_delay_until", json_timestamp(s.lock_delay ? std::optional(s.lock_delay->until_ms) : std::nullopt)},
  };
}

// Only a lock that is held (or whose lease ran out without a release) has a holder to show:
// a free key's columns about the holder stay empty, its past is in the LAST-* columns.
std::vector<std::string> to_row(const Line& line) {
  const LockStatus& s = line.lock;
  auto expires_in = expires_in_ms(s);
  bool holder = s.state != LockStatus::State::free && s.acquired_at_ms.has_value();
  bool held = holder && s.state == LockStatus::State::held;
  auto when = [](std::optional<std::int64_t> ms) { return ms ? format_timestamp(ms) : std::string(); };
  return {
      s.key,
      line.slot ? std::to_string(*line.slot) + "/" + std::to_string(line.slots) : "",
      std::string(to_string(s.state)),
      holder ? s.owner : "",
      holder ? s.host : "",
      holder && s.pid ? std::to_string(s.pid) : "",
      std::to_string(s.token),  // 0 until the first acquisition, as in --json
      holder ? when(s.acquired_at_ms) : "",
      held ? format_duration(Millis(std::max<std::int64_t>(0, s.db_now_ms - *s.acquired_at_ms))) : "",
      expires_in ? format_duration(Millis(*expires_in)) : "",
      holder ? s.strategy : "",
      holder ? when(s.renewed_at_ms) : "",
      when(s.released_at_ms),
      when(s.last_started_at_ms),
      when(s.last_finished_at_ms),
      s.last_exit_code ? std::to_string(*s.last_exit_code) : "",
  };
}

// A semaphore's header row becomes one line per slot; slot rows are not listed twice.
std::vector<Line> expand_semaphores(Backend& backend, std::vector<LockStatus> locks) {
  std::vector<Line> lines;
  for (auto& lock : locks) {
    if (is_slot_row(lock)) continue;
    if (!is_semaphore_header(lock)) {
      lines.push_back({std::move(lock), std::nullopt, 0});
      continue;
    }
    auto slots = read_slots(backend, lock.key);
    for (auto& slot : slots) lines.push_back({std::move(slot.lock), slot.slot, static_cast<int>(slots.size())});
  }
  return lines;
}

}  // namespace

CommandAction define_status(CLI::App& sub) {
  auto args = std::make_shared<StatusArgs>();
  sub.add_option("key", args->keys, "Only these keys (default: every lock)")->check([](const std::string& key) {
    auto ok = validate_key(key);
    return ok ? std::string() : ok.error().message;
  });
  sub.add_flag("-J,--json", args->json, "One JSON document (fields in dblock(1))");
  add_table_options(sub, args->table, status_columns);
  return [args](Context& context) -> int {
    bool quiet = log::level() == log::Level::quiet;
    if (quiet && args->keys.empty()) throw FatalError{{ErrorKind::usage, "status -q needs at least one KEY"}};
    auto backend = context.open_for_inspection();
    auto lines = expand_semaphores(*backend, value_or_throw(backend->status(args->keys)));
    if (quiet) {
      // status -q KEY...: the exit status alone answers "is it held?"; a semaphore is held
      // when any of its slots is.
      std::map<std::string, bool> held;
      for (const auto& line : lines)
        held[line.lock.key] = held[line.lock.key] || line.lock.state == LockStatus::State::held;
      for (const auto& [key, yes] : held)
        if (!yes) return exit_free;
      return held.empty() ? exit_free : exit_ok;
    }
    // The database's failover lock-delay blocks every key alike (dblock(1) GUARANTEES, "Failover lock-delay").
    std::optional<LockDelay> delay;
    for (const auto& line : lines)
      if (line.lock.lock_delay) delay = line.lock.lock_delay;
    if (args->json) {
      nlohmann::json doc = {{"locks", nlohmann::json::array()}, {"lock_delay", nullptr}};
      for (const auto& line : lines) doc["locks"].push_back(to_json(line));
      if (delay)
        doc["lock_delay"] = {{"failover", delay->failover},
                             {"until", json_timestamp(delay->until_ms)},
                             {"until_in_ms", delay->until_ms - delay->db_now_ms}};
      print_json(doc);
      return exit_ok;
    }
    if (delay) std::cerr << "note: every key is " << describe_lock_delay(*delay) << "\n";
    if (context.options.table_format == "shedlock")
      std::cerr << "note: ShedLock has no fencing token: TOKEN counts dblock's own acquisitions (its " +
                       context.options.table_prefix + "locks row of the name); a Java holder's writes cannot be fenced\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& line : lines) rows.push_back(to_row(line));
    print_table(status_columns, args->table, rows);
    return exit_ok;
  };
}

}  // namespace dblock::cli

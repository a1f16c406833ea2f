// dblock doctor: one line per check (dblock(1), SUBCOMMANDS: doctor); exit 0 if all is well, 69 when
// the database cannot be reached or has no dblock tables, 78 otherwise. It only looks: the
// database is opened as every inspection opens it (read-only, creating nothing).

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "backends/registry.hpp"
#include "cli/commands.hpp"
#include "core/clock.hpp"
#include "core/duration.hpp"
#include "core/exit_code.hpp"

namespace dblock::cli {
namespace {

// Past this, crontabs on different hosts disagree enough that --min-hold should cover it.
constexpr std::int64_t clock_tolerance_ms = 1000;

void print_check(const DoctorCheck& check) {
  std::cout << (!check.ok ? "FAIL  " : check.warn ? "WARN  " : "ok    ") << check.name << ": " << check.detail << '\n';
}

// Which config file was read; a default file that exists and was not read is a warning, as
// its settings are silently not in force (only one file is read: dblock(1), FILES).
DoctorCheck config_check(const GlobalOptions& options) {
  std::string detail = "read " + options.config_file;
  if (options.config_file.empty() && !options.config_chosen_by.empty()) {
    detail = "no config file read";
  } else if (options.config_file.empty()) {
    detail = "no config file read (none of ";
    for (std::size_t i = 0; i < options.config_defaults.size(); ++i)
      detail += (i ? ", " : "") + options.config_defaults[i];
    detail += " exists)";
  }
  if (!options.config_chosen_by.empty()) detail += " (" + options.config_chosen_by + ")";
  for (std::size_t i = 0; i < options.config_not_read.size(); ++i)
    detail += (i ? ", " : "; not read: ") + options.config_not_read[i];
  if (!options.config_not_read.empty()) detail += ": " + config_not_read_reason(options);
  DoctorCheck check{"config", true, detail};
  check.warn = !options.config_not_read.empty();
  return check;
}

}  // namespace

CommandAction define_doctor(CLI::App&) {
  return [](Context& context) -> int {
    std::vector<DoctorCheck> checks;
    checks.push_back(config_check(context.options));
    const Dsn& dsn = context.dsn();
    Strategy strategy = context.strategy();
    auto loaded = load_backend(dsn.backend);
    const BackendEntry* entry = loaded ? *loaded : nullptr;
    bool supported = entry && std::ranges::find(entry->strategies, strategy) != entry->strategies.end();
    checks.push_back({"strategy", supported,
                      supported ? std::string(to_string(strategy)) + " is supported by " + dsn.backend
                                : std::string(to_string(strategy)) + " is not supported by " + dsn.backend +
                                      (entry ? "; it supports " + describe_strategies(entry->strategies) : "")});
    if (entry) {
      // The library this process has loaded (--version names the one the module was built with).
      const KnownBackend* known = find_backend(dsn.backend);
      const std::string path = known ? module_path(*known) : "";
      checks.push_back({"client", true, entry->client_version() + (path.empty() ? " (built in)" : " (module " + path + ")")});
    }

    // A database that is missing or out of reach is exit 69, as for status; other failed checks 78.
    bool unavailable = false;
    auto failed = [&unavailable](const Error& e) {
      unavailable = unavailable || exit_code_for(e.kind) == exit_unavailable;
      return e.message;
    };
    Millis start = boottime_now();
    auto opened = context.try_open_for_inspection();
    if (!opened) {
      checks.push_back({"connect", false, failed(opened.error())});
    } else {
      auto& backend = **opened;
      Millis connect_time = boottime_now() - start;
      // Median of three round trips, with the host clock read around each one.
      std::vector<std::int64_t> rtts;
      std::int64_t skew = 0;
      bool reached = true;
      for (int i = 0; i < 3 && reached; ++i) {
        std::int64_t before = wall_now_ms();
        Millis sent = boottime_now();
        auto now = backend.now_ms();
        if (!now) {
          checks.push_back({"connect", false, failed(now.error())});
          reached = false;
          break;
        }
        rtts.push_back((boottime_now() - sent).count());
        skew = *now - (before + wall_now_ms()) / 2;
      }
      if (reached) {
        std::ranges::sort(rtts);
        checks.push_back({"connect", true, "connected to " + dsn.redacted + " in " + format_duration(connect_time) +
                                               ", round trip " + std::to_string(rtts[1]) + "ms"});
        // What is true of the backend at hand: a server's clock judges leases; SQLite's "now" is
        // this process's own wall clock, so a skew is always about 0 and says nothing.
        if (!entry || entry->server_clock) {
          bool clock_ok = std::llabs(skew) <= clock_tolerance_ms;
          checks.push_back({"clock", clock_ok,
                            "database clock is " + format_duration(Millis(std::llabs(skew))) +
                                (skew >= 0 ? " ahead of" : " behind") + " this host" +
                                (clock_ok ? " (dblock uses database time for leases)"
                                          : "; fix NTP, or use --min-hold to cover crontabs that fire apart")});
        } else {
          checks.push_back({"clock", true,
                            "the " + dsn.backend + " backend has no server clock: expiry, --min-hold and --min-interval follow "
                            "CLOCK_BOOTTIME on this host (no wall-clock step moves it); the times status and history "
                            "show are this host's wall clock"});
        }
        auto schema = backend.check_schema();
        checks.push_back({"tables", schema.has_value(),
                          schema ? context.options.table_prefix + "locks and " + context.options.table_prefix +
                                       "runs exist with the expected columns"
                                 : failed(schema.error())});
        for (auto& check : backend.doctor_checks(strategy)) checks.push_back(std::move(check));
      }
    }

    bool all_ok = true;
    for (const auto& check : checks) {
      print_check(check);
      all_ok = all_ok && check.ok;
    }
    std::cout.flush();
    if (all_ok) return exit_ok;
    return unavailable ? exit_unavailable : exit_config;
  };
}

}  // namespace dblock::cli

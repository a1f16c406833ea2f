#include "cli/app.hpp"

#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

#include "backends/registry.hpp"
#include "cli/argv_scrub.hpp"
#include "git_revision.hpp"
#include "cli/commands.hpp"
#include "core/acquire_loop.hpp"
#include "core/duration.hpp"
#include "core/exit_code.hpp"
#include "core/event_log.hpp"
#include "core/key.hpp"
#include "core/log.hpp"
#include "core/semaphore.hpp"
#include "core/suggest.hpp"

namespace dblock::cli {
namespace {

constexpr Command command_table[] = {
    {"run", "Run a command while holding the lock; skip if it is held", define_run},
    {"acquire", "Take a lease for a shell script and print its fencing token", define_acquire},
    {"renew", "Extend a lease taken with acquire", define_renew},
    {"release", "Release a lease taken with acquire", define_release},
    {"status", "Show who holds which lock", define_status},
    {"history", "Show recent runs", define_history},
    {"init", "Create the tables", define_init},
    {"schema", "Print the tables' DDL for a DBA", define_schema},
    {"doctor", "Check the set-up, one line per check", define_doctor},
    {"check", "Monitoring plugin: is the last successful run recent enough?", define_check},
    {"metrics", "Prometheus text format for the node_exporter textfile collector", define_metrics},
};

// Environment variable of each global option, also used to let the environment beat the
// config file (CLI11 applies config values before it looks at the environment).
const std::map<std::string, std::string>& option_env() {
  static const std::map<std::string, std::string> env{
      {"strategy", "DBLOCK_STRATEGY"},
      {"table-prefix", "DBLOCK_TABLE_PREFIX"},
      {"log", "DBLOCK_LOG"},
      {"table-format", "DBLOCK_TABLE_FORMAT"},
  };
  return env;
}

bool env_set(const char* name) {
  const char* value = std::getenv(name);
  return value && *value;
}

std::vector<std::string> command_names() {
  std::vector<std::string> names;
  for (const auto& command : command_table) names.emplace_back(command.name);
  return names;
}

/// The subcommand called `name`, or nullptr (CLI11 2.1's own lookup throws).
template <class AppT>
AppT* find_subcommand(AppT& app, const std::string& name) {
  auto found = app.get_subcommands([&](const CLI::App* s) { return s->get_name() == name; });
  return found.empty() ? nullptr : found.front();
}

/// CLI11's INI/TOML reader, minus the keys whose environment variable is set: the
/// environment takes precedence over the config file (dblock(1), OPTIONS). --dsn and --dsn-file are one
/// setting: either of them from the command line or the environment hides both in the file.
class EnvFirstConfig : public CLI::ConfigTOML {
 public:
  /// define_all: declares every subcommand's options (main's define_all), for a file with sections.
  EnvFirstConfig(const CLI::App& app, std::function<void()> define_all) : app_(app), define_all_(std::move(define_all)) {}

  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override {
    std::stringstream text;
    text << input.rdbuf();
    path_ = app_.get_config_ptr()->as<std::string>();
    // Before a word of it is used: whoever may write the file chooses the database.
    if (struct stat st{}; !path_.empty() && ::stat(path_.c_str(), &st) == 0)
      check_trusted_file("config file " + path_, path_, st);
    const auto lines = key_lines(text.str());
    auto parsed = CLI::ConfigTOML::from_config(text);
    // A section names a subcommand whose options may not be declared yet (main, define).
    if (std::any_of(parsed.begin(), parsed.end(), [](const CLI::ConfigItem& item) { return !item.parents.empty(); }))
      define_all_();
    // A misspelt key must not be ignored, and the message says where it is and what was meant.
    std::vector<std::string> known;
    for (const CLI::Option* option : app_.get_options())
      for (const auto& name : option->get_lnames()) known.push_back(name);
    for (const auto& item : parsed) check_known(item, lines, known);
    // Set but empty is given too (and refused later): it must not let the file's DSN through.
    bool dsn_given = app_.get_option("--dsn")->count() > 0 || app_.get_option("--dsn-file")->count() > 0 ||
                     std::getenv("DBLOCK_DSN") || std::getenv("DBLOCK_DSN_FILE") || credential_dsn_file();
    std::erase_if(parsed, [&](const CLI::ConfigItem& item) {
      if (!item.parents.empty()) return false;
      if (item.name == "dsn" || item.name == "dsn-file") return dsn_given;
      auto it = option_env().find(item.name);
      return it != option_env().end() && env_set(it->second.c_str());
    });
    // CLI11 takes a file's value only for an option the command line left unset.
    from_file_.clear();
    for (const auto& item : parsed) {
      // A subcommand's section: "[run]" then "ttl = ..." is run's --ttl.
      const CLI::App* owner = &app_;
      std::string key = item.name;
      if (item.parents.size() == 1) {
        owner = find_subcommand(app_, item.parents.front());
        key = item.parents.front() + "." + item.name;
      } else if (!item.parents.empty()) {
        owner = nullptr;
      }
      const CLI::Option* option = owner ? owner->get_option_no_throw("--" + item.name) : nullptr;
      if (option && option->count() == 0) from_file_[key] = where(lines, key);
    }
    return parsed;
  }

  /// "config file PATH line N" when the value of the option `name` (a global option, or
  /// "run.ttl" for a subcommand's) came from the file.
  std::optional<std::string> source_of(const std::string& name) const {
    auto it = from_file_.find(name);
    if (it == from_file_.end()) return std::nullopt;
    return it->second;
  }
  const std::string& path() const { return path_; }

  /// After a CLI11 ValidationError: the value from the file that a check refuses, as
  /// "config file PATH line N: --history-keep: ...", found by running the options' own checks.
  std::optional<std::string> refused_value(CLI::App& app) const {
    for (const auto& [name, where] : from_file_) {
      CLI::App* owner = &app;
      std::string option_name = name;
      if (auto dot = name.find('.'); dot != std::string::npos) {
        owner = find_subcommand(app, name.substr(0, dot));
        option_name = name.substr(dot + 1);
      }
      CLI::Option* option = owner ? owner->get_option_no_throw("--" + option_name) : nullptr;
      if (!option) continue;
      for (int i = 0;; ++i) {
        CLI::Validator* validator = nullptr;
        try {
          validator = option->get_validator(i);
        } catch (const CLI::OptionNotFound&) {
          break;
        }
        for (std::string value : option->results())
          if (std::string why = (*validator)(value); !why.empty()) return where + ": " + option->get_name() + ": " + why;
      }
    }
    return std::nullopt;
  }

 private:
  // The line of each top-level key ("[section]" keys as section.key), for messages.
  static std::map<std::string, int> key_lines(const std::string& text) {
    std::map<std::string, int> lines;
    std::istringstream in(text);
    std::string line, section;
    for (int number = 1; std::getline(in, line); ++number) {
      auto trim = [](std::string s) {
        s.erase(0, s.find_first_not_of(" \t\"'"));
        s.erase(s.find_last_not_of(" \t\r\"'") + 1);
        return s;
      };
      std::string t = trim(line);
      if (t.empty() || t[0] == '#' || t[0] == ';') continue;
      if (t.front() == '[' && t.back() == ']') {
        section = trim(t.substr(1, t.size() - 2));
        lines.try_emplace("[" + section + "]", number);
        continue;
      }
      auto eq = t.find('=');
      if (eq == std::string::npos) continue;
      std::string key = trim(t.substr(0, eq));
      lines.try_emplace(section.empty() ? key : section + "." + key, number);
    }
    return lines;
  }

  // A key of the file that no option takes, or a section that is no subcommand, is refused with
  // its line and the closest name: CLI11's own message names neither.
  void check_known(const CLI::ConfigItem& item, const std::map<std::string, int>& lines,
                   const std::vector<std::string>& global_names) const {
    if (item.parents.empty()) {
      if (std::find(global_names.begin(), global_names.end(), item.name) != global_names.end()) return;
      throw_unknown(where(lines, item.name) + ": unknown key '" + item.name + "'", item.name, global_names);
    }
    std::string section_name = item.parents.front();
    for (std::size_t i = 1; i < item.parents.size(); ++i) section_name += "." + item.parents[i];
    const CLI::App* sub = item.parents.size() == 1 ? find_subcommand(app_, section_name) : nullptr;
    if (!sub) {
      std::string message = where(lines, "[" + section_name + "]") + ": unknown section [" + section_name + "]";
      if (auto close = closest_match(section_name, command_names())) message += " (did you mean [" + *close + "]?)";
      else message += " (sections are named after subcommands)";
      throw FatalError{{ErrorKind::config, message}};
    }
    // CLI11 marks where a section opens and closes with the items "++" and "--".
    if (item.name == "++" || item.name == "--") return;
    std::vector<std::string> names;
    for (const CLI::Option* option : sub->get_options())
      for (const auto& name : option->get_lnames()) names.push_back(name);
    if (std::find(names.begin(), names.end(), item.name) != names.end()) return;
    const std::string key = section_name + "." + item.name;
    std::string message = where(lines, key) + ": unknown key '" + item.name + "' in section [" + section_name + "]";
    if (std::find(global_names.begin(), global_names.end(), item.name) != global_names.end())
      throw FatalError{
          {ErrorKind::config, message + " ('" + item.name + "' is a global option: put it above every section)"}};
    throw_unknown(message, item.name, names);
  }

  [[noreturn]] static void throw_unknown(std::string message, const std::string& word,
                                         const std::vector<std::string>& candidates) {
    if (auto close = closest_match(word, candidates)) message += " (did you mean '" + *close + "'?)";
    throw FatalError{{ErrorKind::config, message}};
  }

  std::string where(const std::map<std::string, int>& lines, const std::string& name) const {
    auto it = lines.find(name);
    std::string text = "config file " + path_;
    if (it != lines.end()) text += " line " + std::to_string(it->second);
    return text;
  }

  const CLI::App& app_;
  std::function<void()> define_all_;
  // CLI11 calls from_config as const; what it learns about the file is kept for the messages.
  mutable std::string path_;
  mutable std::map<std::string, std::string> from_file_;
};

// The default config files, in the order dblock(1) FILES names them.
std::vector<std::string> config_candidates() {
  std::vector<std::string> candidates{"/etc/dblock/dblock.conf"};
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg)
    candidates.push_back(std::string(xdg) + "/dblock/dblock.conf");
  else if (const char* home = std::getenv("HOME"); home && *home)
    candidates.push_back(std::string(home) + "/.config/dblock/dblock.conf");
  return candidates;
}

// DBLOCK_CONFIG, else the first of config_candidates() that exists: one file is read, never a
// layer of them, so the system's file (say, the farm's DSN) is not changed by a user's. (CLI11
// reads the config file before it looks at the environment, so DBLOCK_CONFIG is resolved here.)
std::string default_config_path() {
  if (const char* explicit_path = std::getenv("DBLOCK_CONFIG"); explicit_path && *explicit_path) {
    if (access(explicit_path, R_OK) != 0)
      throw FatalError{{ErrorKind::config, std::string("DBLOCK_CONFIG: cannot read ") + explicit_path}};
    return explicit_path;
  }
  for (const auto& path : config_candidates())
    if (access(path.c_str(), F_OK) == 0) return path;
  return "";
}

// Which config file was read and why, and which default files exist but were not read, for
// `doctor` and -v (dblock(1), FILES).
void note_config_files(GlobalOptions& options, int argc, char** argv, const std::string& used) {
  options.config_file = used;
  // CLI11 counts the default file as given too: look at the words before any "--".
  bool given = false;
  for (int i = 1; i < argc && std::strcmp(argv[i], "--") != 0; ++i)
    given = given || std::strcmp(argv[i], "--config") == 0 || std::strncmp(argv[i], "--config=", 9) == 0;
  const bool from_env = !given && env_set("DBLOCK_CONFIG");
  options.config_chosen_by = given ? "--config" : from_env ? "DBLOCK_CONFIG" : "";
  options.config_defaults = config_candidates();
  for (const auto& path : options.config_defaults) {
    if (path == used || access(path.c_str(), F_OK) != 0) continue;
    options.config_not_read.push_back(path);
  }
  if (!used.empty())
    log::verbose("config file " + used + (options.config_chosen_by.empty() ? "" : " (" + options.config_chosen_by + ")"));
  for (const auto& path : options.config_not_read)
    log::verbose("config file " + path + " is not read: " + config_not_read_reason(options));
}

// A config file that holds a password must not be readable by other users.
void warn_about_config_permissions(const std::string& path) {
  if (path.empty()) return;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string value = line.substr(eq + 1);
    if (redact_dsn(value) != value || line.find("password") != std::string::npos) {
      check_private_file("config file " + path, path, false);
      return;
    }
  }
}

// Global values are checked before any subcommand runs, so `status` refuses a bad strategy as
// `run` does; one that came from the config file names the file and line (exit 78).
void check_global_values(Context& context, const EnvFirstConfig& config) {
  auto check = [&](const std::string& key, const std::function<void()>& test) {
    try {
      test();
    } catch (const FatalError& e) {
      if (auto where = config.source_of(key)) throw FatalError{{ErrorKind::config, *where + ": " + e.error.message}};
      throw;
    }
  };
  check("strategy", [&] { (void)context.strategy(); });
  check("table-prefix", [&] { value_or_throw(validate_table_prefix(context.options.table_prefix)); });
  check("connect-timeout", [&] { (void)duration_option("--connect-timeout", context.options.connect_timeout); });
}

std::string version_text() {
  // Loads no module, so it costs what --help does: a module's client library is named as the
  // build found it (a module loads only into an executable of its own version and compiler,
  // DBLOCK_MODULE_ABI). doctor names the one a DSN's module has loaded.
  std::string text = "dblock " DBLOCK_VERSION;
  if (*DBLOCK_GIT_REVISION) text += " (git " DBLOCK_GIT_REVISION ")";
  text += "\nbackends:";
  for (const auto& known : known_backends()) {
    text += "\n  " + std::string(known.name) + " (";
    for (std::size_t i = 0; i < known.schemes.size(); ++i) text += (i ? ", " : "") + std::string(known.schemes[i]) + ":";
    text += ") ";
    if (known.module.empty()) {
      auto entry = load_backend(known.name);  // linked in: nothing to load
      text += (entry ? (*entry)->client_version() : entry.error().message);
    } else {
      std::string path = module_path(known);
      if (path.empty()) {
        text += "not installed (Debian package " + std::string(known.package) + ")";
        continue;
      }
      text += "module " + path + "; built with " + std::string(known.built_with);
    }
    text += "; strategies: " + describe_strategies(known.strategies);
  }
  return text;
}

void add_global_options(CLI::App& app, GlobalOptions& g) {
  // No CLI11 envname here: DBLOCK_DSN and DBLOCK_DSN_FILE are one setting, resolved in Context::dsn().
  auto* dsn = app.add_option("-d,--dsn", g.dsn, "Database: sqlite:/path.db, mysql://..., postgres://... (env DBLOCK_DSN)");
  app.add_option("--dsn-file", g.dsn_file, "Read the DSN from this file, keeps passwords out of ps (env DBLOCK_DSN_FILE)")
      ->excludes(dsn);
  app.add_option("-s,--strategy", g.strategy, "lease, advisory, for-update or txn-insert")
      ->envname("DBLOCK_STRATEGY")
      ->capture_default_str();
  app.add_option("--table-prefix", g.table_prefix, "Tables are <prefix>locks and <prefix>runs")
      ->envname("DBLOCK_TABLE_PREFIX")
      ->capture_default_str();
  app.add_option("--table-format", g.table_format, "dblock, or shedlock: share locks with Java ShedLock services")
      ->check(CLI::IsMember({"dblock", "shedlock"}))
      ->envname("DBLOCK_TABLE_FORMAT")
      ->capture_default_str();
  app.add_option("--table", g.table, "The ShedLock table of --table-format shedlock")->capture_default_str();
  app.add_option("--history-keep", g.history_keep, "Runs kept per key in the history table")
      ->check(whole_number(1, std::numeric_limits<int>::max()))
      ->capture_default_str();
  app.add_option("--connect-timeout", g.connect_timeout, "Give up connecting to the database after this long")
      ->type_name("DURATION")
      ->capture_default_str();
  auto* verbose = app.add_flag("-v,--verbose", g.verbose, "Explain every decision on stderr");
  app.add_flag("-q,--quiet", g.quiet, "Print nothing but errors")->excludes(verbose);
  app.add_option("--log", g.log, "Also log skips, waits, losses, kills and errors to syslog or journal")
      ->envname("DBLOCK_LOG")
      ->check(CLI::IsMember({"stderr", "syslog", "journal"}))
      ->capture_default_str();
  app.add_flag("--log-runs", g.log_runs, "With --log syslog|journal: also the start and end of every run");
}

// "unknown subcommand 'stauts' (did you mean 'status'?)", or the list when nothing is close.
std::string unknown_subcommand(const std::string& word) {
  std::string message = "unknown subcommand '" + word + "'";
  if (auto close = closest_match(word, command_names())) return message + " (did you mean '" + *close + "'?)";
  return message + " ('dblock help' lists them)";
}

// A word as a shell would need it, for a command line printed back to the user.
std::string shell_quote(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                              "_-+=.,:/@%") == std::string::npos)
    return word;
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Where `run`'s command starts in a command line that has no "--": the first word after KEY
// that is neither an option nor an option's value. -w's value is optional: the next word is
// its value only when it is a duration. 0 when there is no such word or an option is unknown.
int run_command_start(const CLI::App& app, const CLI::App& run, int argc, char** argv) {
  bool in_run = false, key_seen = false;
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (word.size() > 1 && word[0] == '-') {
      std::string name = word.substr(0, word.find('='));
      const CLI::Option* option = in_run ? run.get_option_no_throw(name) : nullptr;
      if (!option) option = app.get_option_no_throw(name);
      if (!option) return 0;
      if (word.find('=') != std::string::npos || option->get_items_expected_max() == 0) continue;
      if (option->get_items_expected_min() > 0 || (i + 1 < argc && parse_duration(argv[i + 1]))) ++i;
    } else if (!in_run) {
      if (word != run.get_name()) return 0;
      in_run = true;
    } else if (!key_seen) {
      key_seen = true;
    } else {
      return i;
    }
  }
  return 0;
}

// The same command line with "--" before run's command, printed back (passwords redacted).
std::string with_dashes(int argc, char** argv, int command_start) {
  std::string line = "dblock";
  for (int i = 1; i < argc; ++i) {
    if (i == command_start) line += " --";
    line += " " + shell_quote(redact_dsn(argv[i]));
  }
  return line;
}

// "run: the command goes after '--' ...", with the corrected line when the command's start is known.
std::string missing_dashes(int argc, char** argv, int command_start) {
  std::string message = "run: the command goes after '--' (options after it are the command's): ";
  if (command_start == 0) return message + "dblock run KEY [OPTIONS] -- COMMAND [ARG...]";
  return message + with_dashes(argc, argv, command_start);
}

// For an option CLI11 did not expect: the subcommand it belongs to when it stands before that
// subcommand's name (or after another's), else the closest option name. nullopt when no word is
// an option.
std::optional<std::string> misplaced_option(const CLI::App& app, const std::vector<std::string>& extras) {
  auto all = app.get_subcommands([](const CLI::App*) { return true; });
  const CLI::App* chosen = nullptr;
  for (const CLI::App* sub : all)
    if (sub->parsed()) chosen = sub;
  for (const auto& word : extras) {
    if (word.size() < 2 || word[0] != '-') continue;
    const std::string name = word.substr(0, word.find('='));
    std::vector<std::string> owners;
    for (const CLI::App* sub : all)
      if (sub->get_option_no_throw(name)) owners.push_back(sub->get_name());
    auto owned_by = [&](const std::string& sub) {
      return std::find(owners.begin(), owners.end(), sub) != owners.end();
    };
    std::string list;
    for (const auto& owner : owners) list += (list.empty() ? "'" : ", '") + owner + "'";
    if (chosen && owned_by(chosen->get_name()))
      return "'" + name + "' is an option of '" + chosen->get_name() + "': put it after 'dblock " + chosen->get_name() +
             "'";
    if (!owners.empty())
      return "'" + name + "' is not an option of " + (chosen ? "'" + chosen->get_name() + "'" : "dblock itself") +
             " (it is one of " + list + ")";
    // Misspelt: the long names of dblock's options, then of the subcommand's (or of every one).
    std::vector<std::string> candidates;
    std::map<std::string, std::string> owner_of;
    auto add = [&](const CLI::App& from, const std::string& sub) {
      for (const CLI::Option* option : from.get_options())
        for (const auto& long_name : option->get_lnames()) {
          candidates.push_back("--" + long_name);
          owner_of.try_emplace("--" + long_name, sub);
        }
    };
    add(app, "");
    for (const CLI::App* sub : all)
      if (!chosen || sub == chosen) add(*sub, sub->get_name());
    std::string message = "unknown option '" + name + "'";
    if (auto close = closest_match(name, candidates)) {
      message += " (did you mean '" + *close + "'";
      const std::string& sub = owner_of[*close];
      if (!sub.empty()) message += ", an option of '" + sub + "'";
      message += "?)";
    }
    return message;
  }
  return std::nullopt;
}

// The root. CLI11 gives each subcommand a copy of the root's help flag as it makes it (while
// the root's help_ptr_ is set): an option of its own, about 13k instructions each, and there
// are a dozen subcommands of which a run parses one. A subcommand's help flag is declared with
// its options instead (main's define), first among them, as the copy was.
class RootApp : public CLI::App {
 public:
  using CLI::App::App;
  /// Runs `add`, which makes the subcommands, with the help flag hidden from them.
  template <class Add>
  void add_without_help(Add&& add) {
    struct Restore {
      CLI::Option*& slot;
      CLI::Option* help;
      ~Restore() { slot = help; }
    } restore{help_ptr_, std::exchange(help_ptr_, nullptr)};
    add();
  }
};

}  // namespace

std::span<const Command> commands() { return command_table; }

CLI::Option* add_key(CLI::App& sub, std::string& key) {
  return sub.add_option("key", key, "Lock name: 1 to 255 bytes of UTF-8, no control characters")
      ->required()
      ->check([](const std::string& value) {
        auto ok = validate_key(value);
        return ok ? std::string() : ok.error().message;
      });
}

CLI::Option* add_owner(CLI::App& sub, std::string& owner, const std::string& help) {
  return sub.add_option("--owner", owner, help)->check([](const std::string& value) {
    auto ok = validate_owner(value);
    return ok ? std::string() : ok.error().message;
  });
}

CLI::Option* add_duration(CLI::App& sub, const std::string& names, std::string& value, const std::string& help) {
  return sub.add_option(names, value, help)->type_name("DURATION")->check([](const std::string& text) {
    auto d = parse_duration(text);
    return d ? std::string() : d.error().message;
  });
}

CLI::Option* add_slots(CLI::App& sub, int& slots) {
  return sub
      .add_option("--slots", slots,
                  "A semaphore: at most N holders of KEY at once on every host (all must give the same N); "
                  "the command gets DBLOCK_SLOT (0..N-1)")
      ->type_name("N")
      ->check(whole_number(1, max_slots, "slot count"));
}

void apply_slots(LockRequest& request, int slots) {
  if (slots == 0) return;
  value_or_throw(validate_slots(request.key, slots));
  if (request.min_interval > Millis(0))
    throw FatalError{{ErrorKind::usage, "--min-interval cannot be used with --slots: it spaces the starts of one "
                                        "holder at a time"}};
  request.slots = slots;
}

CLI::Validator whole_number(std::int64_t min, std::int64_t max, const std::string& what) {
  std::string range = max == std::numeric_limits<std::int64_t>::max()
                          ? "from " + std::to_string(min) + " up"
                          : "from " + std::to_string(min) + " to " + std::to_string(max);
  return CLI::Validator(
      [min, max, what, range](std::string& text) {
        std::int64_t value = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec == std::errc{} && end == text.data() + text.size() && value >= min && value <= max)
          return std::string();
        if (what == "whole number") return "'" + text + "' is not a whole number " + range;
        return "'" + text + "' is not a " + what + " (a whole number " + range + ")";
      },
      range, "");
}

CLI::Option* add_wait(CLI::App& sub, std::vector<std::string>& value) {
  return sub.add_option("-w,--wait", value, "Wait up to D for the lock (no D: forever; -w 0 = do not wait)")
      ->expected(0, 1)
      ->type_name("[DURATION]")
      ->check([](const std::string& text) {
        auto d = parse_duration(text);
        return d ? std::string() : d.error().message;
      });
}

std::optional<Millis> resolve_wait(const CLI::Option& option, const std::vector<std::string>& value) {
  if (option.count() == 0) return std::nullopt;
  if (value.empty() || value.front().empty()) return Millis::max();
  Millis d = duration_option("--wait", value.front());
  if (d == Millis(0)) return std::nullopt;
  return d;
}

CLI::Option* add_overload_retry(CLI::App& sub, std::string& value) {
  value = format_duration(default_overload_retry);
  return add_duration(sub, "--overload-retry", value,
                      "Without -w, retry for up to D when the server turns connections away (too many "
                      "connections); at most ttl/3, 0 = off")
      ->capture_default_str();
}

int main(int argc, char** argv) {
  // One malloc arena. dblock's only other thread, run's heartbeat, allocates a few strings;
  // its own arena would cost every run a 64 MiB reservation, its trimming and the page faults
  // of a fresh heap (docs/performance.md, SQLite).
  ::mallopt(M_ARENA_MAX, 1);
  Context context;
  RootApp app{"dblock: run a job on exactly one host, using a shared SQL database as the lock", "dblock"};
  app.set_version_flag("-V,--version", std::function<std::string()>(version_text));
  app.footer("'dblock help SUBCOMMAND' shows a subcommand's options; man dblock has the rest.");
  app.require_subcommand(1);
  app.fallthrough();  // global options may also stand after the subcommand name
  // A subcommand's options are declared when CLI11 starts parsing it (its pre-parse callback),
  // so a run builds run's options only: building every subcommand's was an eighth of a short
  // SQLite run's instructions (docs/performance.md, SQLite, round three). Whatever looks at
  // another subcommand's options (help, the config file's sections, the messages for a
  // command line that does not parse) declares them all first.
  struct Lazy {
    CLI::App* sub;
    const Command* command;
    CommandAction action;
  };
  std::vector<Lazy> actions;
  actions.reserve(commands().size());
  auto define = [&app](Lazy& lazy) {
    if (lazy.action) return;
    if (const CLI::Option* help = app.get_help_ptr())
      lazy.sub->set_help_flag(help->get_name(false, true), help->get_description());
    lazy.action = lazy.command->define(*lazy.sub);
  };
  auto define_all = [&] {
    for (auto& lazy : actions) define(lazy);
  };
  auto config = std::make_shared<EnvFirstConfig>(app, define_all);
  app.config_formatter(config);
  app.allow_config_extras(CLI::config_extras_mode::error);  // a misspelt key must not be ignored
  std::string config_default;
  try {
    config_default = default_config_path();
  } catch (const FatalError& e) {
    log::error(e.error.message);
    return exit_code_for(e.error.kind);
  }
  app.set_config("--config", config_default,
                 "Config file (keys are long option names; default DBLOCK_CONFIG, /etc/dblock/dblock.conf, "
                 "then $XDG_CONFIG_HOME/dblock/dblock.conf)");
  add_global_options(app, context.options);

  app.add_without_help([&] {
    for (const auto& command : commands()) {
      CLI::App* sub = app.add_subcommand(std::string(command.name), std::string(command.summary));
      actions.push_back({sub, &command, {}});
      sub->preparse_callback([&actions, &define, i = actions.size() - 1](std::size_t) { define(actions[i]); });
    }
  });

  // Everything after the first "--" is the command of `run`, untouched: CLI11 would let an
  // option with an optional value (-w) swallow the "--" and then parse the command's options.
  int parsed_argc = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      parsed_argc = i;
      context.command_after_dashes.assign(argv + i + 1, argv + argc);
      context.has_dashes = true;
      break;
    }
  }

  // `dblock help [SUBCOMMAND]`: the same text as --help, and no complaint about a missing KEY.
  if (argc >= 2 && std::strcmp(argv[1], "help") == 0) {
    define_all();
    if (argc == 2) {
      std::cout << app.help();
      return exit_ok;
    }
    for (auto& [sub, command, action] : actions)
      if (sub->get_name() == argv[2]) {
        std::cout << sub->help("dblock");
        return exit_ok;
      }
    log::error(unknown_subcommand(argv[2]));
    return exit_usage;
  }

  CLI::App* run = nullptr;
  for (auto& [sub, command, action] : actions)
    if (sub->get_name() == "run") run = sub;
  try {
    app.parse(parsed_argc, argv);
  } catch (const FatalError& e) {  // the config file reader names the file and line
    log::error(e.error.message);
    return exit_code_for(e.error.kind);
  } catch (const CLI::CallForHelp& e) {
    define_all();
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    define_all();
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::FileError& e) {
    log::error(e.what());
    return exit_config;
  } catch (const CLI::ConfigError& e) {
    log::error("config file " + config->path() + ": " + e.what());
    return exit_config;
  } catch (const CLI::ParseError& e) {
    define_all();
    if (dynamic_cast<const CLI::ValidationError*>(&e))
      if (auto refused = config->refused_value(app)) {
        log::error(*refused);
        return exit_config;
      }
    // A word that is not a subcommand, where one is required.
    if (app.get_subcommands().empty()) {
      for (const auto& word : app.remaining())
        if (!word.empty() && word[0] != '-') {
          log::error(unknown_subcommand(word));
          return exit_usage;
        }
      if (dynamic_cast<const CLI::RequiredError*>(&e)) {
        log::error("no subcommand given ('dblock help' lists them)");
        return exit_usage;
      }
    }
    // `run KEY ls -l` or `run KEY -w 2 echo hi`: the command's words were taken for options.
    // When the same line with "--" before the command parses, say so and show it.
    if (run && run->parsed() && !context.has_dashes &&
        (dynamic_cast<const CLI::ExtrasError*>(&e) || dynamic_cast<const CLI::ValidationError*>(&e) ||
         dynamic_cast<const CLI::ConversionError*>(&e))) {
      if (int start = run_command_start(app, *run, parsed_argc, argv)) {
        app.clear();
        bool parses = true;
        try {
          app.parse(start, argv);
        } catch (const std::exception&) {
          parses = false;
        }
        if (parses) {
          log::error(missing_dashes(argc, argv, start));
          return exit_usage;
        }
      }
    }
    if (dynamic_cast<const CLI::ExtrasError*>(&e))
      if (auto misplaced = misplaced_option(app, app.remaining(true))) {
        log::error(*misplaced);
        log::error("try 'dblock help' or 'dblock help SUBCOMMAND'");
        // `check` answers a monitoring system: UNKNOWN (3) and its one line, as for any bad usage.
        return failure_exit_status(app, exit_usage, *misplaced);
      }
    log::error(e.what());
    // A value in plain words needs no pointer to the help; a misplaced word does.
    if (!dynamic_cast<const CLI::ValidationError*>(&e)) log::error("try 'dblock help' or 'dblock help SUBCOMMAND'");
    return failure_exit_status(app, exit_usage, e.what());
  }

  // Words of run's command before any "--" parsed only by luck: the next option in them
  // (curl -s, grep -q) would have been dblock's. The command always goes after "--".
  if (run && run->parsed() && !context.has_dashes && run->get_option_no_throw("command")->count() > 0) {
    log::error(missing_dashes(argc, argv, run_command_start(app, *run, parsed_argc, argv)));
    return exit_usage;
  }

  // Where the DSN settings came from, for the message that refuses an empty one.
  auto given_in = [&](const std::string& name) -> std::string {
    if (auto where = config->source_of(name)) return *where + ": " + name;
    return app.get_option("--" + name)->count() > 0 ? "--" + name : "";
  };
  context.options.dsn_from = given_in("dsn");
  context.options.dsn_file_from = given_in("dsn-file");
  context.options.dsn_in_config = config->source_of("dsn") || config->source_of("dsn-file");

  log::set_level(context.options.verbose ? log::Level::verbose
                 : context.options.quiet ? log::Level::quiet
                                         : log::Level::normal);
  log::set_interactive(isatty(STDERR_FILENO) == 1);
  event_log::configure(event_log::parse_sink(context.options.log).value_or(event_log::Sink::stderr_only),
                       context.options.log_runs);
  std::string config_used = app.get_config_ptr()->as<std::string>();
  note_config_files(context.options, parsed_argc, argv, config_used);
  warn_about_config_permissions(config_used);
  if (scrub_passwords_from_argv(argc, argv))
    log::warn("a password on the command line was visible to ps until now; use --dsn-file or ~/.my.cnf / ~/.pgpass");

  try {
    check_global_values(context, *config);
  } catch (const FatalError& e) {
    log::error(e.error.message);
    return exit_code_for(e.error.kind);
  } catch (const std::exception& e) {
    log::error(std::string("internal error: ") + e.what());
    return exit_internal;
  }
  for (auto& [sub, command, action] : actions) {
    if (!sub->parsed()) continue;
    // An error while acting on a key (run, acquire...: KEY is required) names it; status
    // and history only filter by their keys, and their errors are about the database.
    const CLI::Option* key_option = sub->get_option_no_throw("key");
    const std::string key =
        key_option && key_option->get_required() && key_option->count() == 1 ? key_option->results().front() : "";
    try {
      return action(context);
    } catch (const FatalError& e) {
      log::error(error_line(key, e.error));
      return exit_code_for(e.error.kind);
    } catch (const std::exception& e) {
      log::error(error_line(key, {ErrorKind::internal, std::string("internal error: ") + e.what()}));
      return exit_internal;
    }
  }
  return exit_usage;
}

}  // namespace dblock::cli

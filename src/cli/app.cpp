#include "cli/app.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>

#include "backends/registry.hpp"
#include "cli/argv_scrub.hpp"
#include "cli/commands.hpp"
#include "core/duration.hpp"
#include "core/exit_code.hpp"
#include "core/key.hpp"
#include "core/log.hpp"

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
};

// Environment variable of each global option, also used to let the environment beat the
// config file (CLI11 applies config values before it looks at the environment).
const std::map<std::string, std::string>& option_env() {
  static const std::map<std::string, std::string> env{
      {"strategy", "DBLOCK_STRATEGY"},
      {"table-prefix", "DBLOCK_TABLE_PREFIX"},
      {"table-format", "DBLOCK_TABLE_FORMAT"},
  };
  return env;
}

bool env_set(const char* name) {
  const char* value = std::getenv(name);
  return value && *value;
}

/// CLI11's INI/TOML reader, minus the keys whose environment variable is set: the
/// environment takes precedence over the config file (dblock(1), OPTIONS). --dsn and --dsn-file are one
/// setting: either of them from the command line or the environment hides both in the file.
class EnvFirstConfig : public CLI::ConfigTOML {
 public:
  explicit EnvFirstConfig(const CLI::App& app) : app_(app) {}

  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override {
    auto parsed = CLI::ConfigTOML::from_config(input);
    bool dsn_given = app_.get_option("--dsn")->count() > 0 || app_.get_option("--dsn-file")->count() > 0 ||
                     env_set("DBLOCK_DSN") || env_set("DBLOCK_DSN_FILE");
    std::erase_if(parsed, [&](const CLI::ConfigItem& item) {
      if (!item.parents.empty()) return false;
      if (item.name == "dsn" || item.name == "dsn-file") return dsn_given;
      auto it = option_env().find(item.name);
      return it != option_env().end() && env_set(it->second.c_str());
    });
    return parsed;
  }

 private:
  const CLI::App& app_;
};

// DBLOCK_CONFIG, else the config files in the order dblock(1) FILES names them: the first that exists
// is read. (CLI11 reads the config file before it looks at the environment, so DBLOCK_CONFIG
// is resolved here.)
std::string default_config_path() {
  if (const char* explicit_path = std::getenv("DBLOCK_CONFIG"); explicit_path && *explicit_path) {
    if (access(explicit_path, R_OK) != 0)
      throw FatalError{{ErrorKind::config, std::string("DBLOCK_CONFIG: cannot read ") + explicit_path}};
    return explicit_path;
  }
  std::vector<std::string> candidates{"/etc/dblock/dblock.conf"};
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg)
    candidates.push_back(std::string(xdg) + "/dblock/dblock.conf");
  else if (const char* home = std::getenv("HOME"); home && *home)
    candidates.push_back(std::string(home) + "/.config/dblock/dblock.conf");
  for (const auto& path : candidates)
    if (access(path.c_str(), F_OK) == 0) return path;
  return "";
}

// A config file that holds a password must not be readable by other users.
void warn_about_config_permissions(const std::string& path) {
  if (path.empty()) return;
  struct stat st{};
  if (stat(path.c_str(), &st) != 0 || !(st.st_mode & S_IROTH)) return;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string value = line.substr(eq + 1);
    if (redact_dsn(value) != value || line.find("password") != std::string::npos) {
      log::warn("config file " + path + " holds a password and is readable by other users (chmod 600 it)");
      return;
    }
  }
}

std::string version_text() {
  // Loads no module: a server backend is listed by where its module is, so --version stays as
  // cheap as the SQLite default and says what to install when a module is missing.
  std::string text = "dblock " DBLOCK_VERSION "\nbackends:";
  for (const auto& known : known_backends()) {
    text += "\n  " + std::string(known.name) + " (";
    for (std::size_t i = 0; i < known.schemes.size(); ++i) text += (i ? ", " : "") + std::string(known.schemes[i]) + ":";
    text += ") ";
    if (known.module.empty()) {
      auto entry = load_backend(known.name);
      text += entry ? "strategies: " + describe_strategies(**entry) : entry.error().message;
    } else if (std::string path = module_path(known); !path.empty()) {
      text += "module " + path;
    } else {
      text += "not installed (Debian package " + std::string(known.package) + ")";
    }
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
      ->capture_default_str();
  app.add_option("--connect-timeout", g.connect_timeout, "Give up connecting to the database after this long")
      ->capture_default_str();
  auto* verbose = app.add_flag("-v,--verbose", g.verbose, "Explain every decision on stderr");
  app.add_flag("-q,--quiet", g.quiet, "Print nothing but errors")->excludes(verbose);
}

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

CLI::Option* add_duration(CLI::App& sub, const std::string& names, std::string& value, const std::string& help) {
  return sub.add_option(names, value, help)->check([](const std::string& text) {
    auto d = parse_duration(text);
    return d ? std::string() : d.error().message;
  });
}

CLI::Option* add_wait(CLI::App& sub, std::vector<std::string>& value) {
  return sub.add_option("-w,--wait", value, "Wait up to D for the lock (no D: forever; -w 0 = do not wait)")
      ->expected(0, 1)
      ->type_name("[D]")
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

int main(int argc, char** argv) {
  Context context;
  CLI::App app{"dblock: run a job on exactly one host, using a shared SQL database as the lock", "dblock"};
  app.set_version_flag("--version", version_text());
  app.require_subcommand(1);
  app.fallthrough();  // global options may also stand after the subcommand name
  app.config_formatter(std::make_shared<EnvFirstConfig>(app));
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

  std::vector<std::pair<CLI::App*, CommandAction>> actions;
  for (const auto& command : commands()) {
    CLI::App* sub = app.add_subcommand(std::string(command.name), std::string(command.summary));
    actions.emplace_back(sub, command.define(*sub));
  }

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

  try {
    app.parse(parsed_argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::FileError& e) {
    log::error(e.what());
    return exit_config;
  } catch (const CLI::ConfigError& e) {
    log::error(std::string("config file: ") + e.what());
    return exit_config;
  } catch (const CLI::ParseError& e) {
    log::error(e.what());
    log::error("try 'dblock --help' or 'dblock SUBCOMMAND --help'");
    return exit_usage;
  }

  log::set_level(context.options.verbose ? log::Level::verbose
                 : context.options.quiet ? log::Level::quiet
                                         : log::Level::normal);
  std::string config_used = app.get_config_ptr()->as<std::string>();
  if (!config_used.empty()) log::verbose("config file " + config_used);
  warn_about_config_permissions(config_used);
  if (scrub_passwords_from_argv(argc, argv))
    log::verbose("warning: a password on the command line was visible to ps until now; use --dsn-file or ~/.my.cnf / ~/.pgpass");

  try {
    for (auto& [sub, action] : actions)
      if (sub->parsed()) return action(context);
    return exit_usage;
  } catch (const FatalError& e) {
    log::error(e.error.message);
    return exit_code_for(e.error.kind);
  } catch (const std::exception& e) {
    log::error(std::string("internal error: ") + e.what());
    return exit_internal;
  }
}

}  // namespace dblock::cli

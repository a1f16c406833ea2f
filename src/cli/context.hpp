#pragma once
// What every subcommand needs once the command line, environment and config file are read.

#include <sys/stat.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/common/dsn.hpp"
#include "core/acquire_loop.hpp"
#include "core/backend.hpp"
#include "core/lock_types.hpp"

namespace dblock::cli {

/// Global options (dblock(1), OPTIONS), as parsed; precedence command line > environment > config > default.
struct GlobalOptions {
  std::string dsn;
  std::string dsn_file;
  // Where dsn / dsn_file came from ("--dsn", "config file PATH line N"); empty when not given.
  std::string dsn_from;
  std::string dsn_file_from;
  bool dsn_in_config = false;  // the DSN setting given came from the config file
  std::string strategy = "lease";
  std::string table_prefix = "dblock_";
  std::string table_format = "dblock";  // or "shedlock" (core/sql/shedlock.hpp)
  std::string table = "shedlock";       // the ShedLock table
  int history_keep = 1000;
  std::string connect_timeout = "5s";
  bool verbose = false;
  bool quiet = false;
  std::string log = "stderr";  // --log: where the events of core/event_log.hpp go
  bool log_runs = false;
  // The config file read (empty: none), what chose it ("--config", "DBLOCK_CONFIG"; empty: the
  // first default file that exists), and the default files that exist but were not read.
  std::string config_file;
  std::string config_chosen_by;
  std::vector<std::string> config_not_read;
  std::vector<std::string> config_defaults;  // the default files, in the order they are looked for
};

/// Why the files of GlobalOptions::config_not_read were not read, for a message.
std::string config_not_read_reason(const GlobalOptions& options);

/// Set by `dblock run` for its command: the run's database, its passwords hidden (redact_dsn).
/// Not a setting: a dblock inside the command that would fall back on a config file's DSN or
/// the default refuses (78) unless that is this database (dblock(1), ENVIRONMENT).
inline constexpr const char* run_database_env = "DBLOCK_RUN_DATABASE";

/// The systemd credential a unit gives dblock (LoadCredential=dblock-dsn:/etc/dblock/dsn):
/// $CREDENTIALS_DIRECTORY/dblock-dsn when that variable is set and the file exists; nullopt
/// otherwise. It stands after DBLOCK_DSN_FILE and before a config file's DSN (dblock(1), DSN).
std::optional<std::string> credential_dsn_file();

/// The DSN as given, not yet parsed (no backend module loaded).
struct DsnSetting {
  std::string text;  // may hold a password: never print it
  std::string file;  // the DSN file it was read from, absolute; empty for a DSN given as text
};

/// Resolved settings shared by the subcommands.
class Context {
 public:
  GlobalOptions options;
  /// The words after the first "--" on the command line (run's COMMAND [ARG...]).
  std::vector<std::string> command_after_dashes;
  bool has_dashes = false;

  /// The DSN to use: --dsn or --dsn-file, DBLOCK_DSN, DBLOCK_DSN_FILE, the systemd credential,
  /// a config file's, else the default (SQLite).
  /// Throws FatalError (usage/config) on a bad or empty value.
  const Dsn& dsn();
  /// The same before parsing, with the file it came from. Inside `dblock run`, a DSN from the
  /// config file or the default that is not the run's own database is FatalError (config).
  const DsnSetting& dsn_setting();
  /// For `run`: what its command is told of the database (DBLOCK_RUN_DATABASE, and
  /// DBLOCK_DSN_FILE when the DSN came from a file), so a dblock in it reaches the same one.
  std::vector<std::pair<std::string, std::string>> database_env_for_command();
  /// The strategy named by --strategy; throws FatalError(usage) for an unknown name.
  Strategy strategy() const;
  /// Backend settings; io_timeout derived from the lease length when one applies.
  BackendOptions backend_options(std::optional<Millis> ttl = std::nullopt) const;
  /// Opens the database and makes sure the tables exist. Throws FatalError on failure.
  std::unique_ptr<Backend> open(std::optional<Millis> ttl = std::nullopt, bool ensure_schema = true);
  /// For the subcommands that only look (status, history, doctor and the monitoring ones):
  /// the one place that decides how an inspection opens the database. Read-only, creating
  /// nothing (no file, directory or table); no database there is FatalError of
  /// ErrorKind::other (exit 69) "no lock database at ...".
  std::unique_ptr<Backend> open_for_inspection();
  /// The same, with the failure returned (doctor reports it as a check); a bad DSN still throws.
  Result<std::unique_ptr<Backend>> try_open_for_inspection();
  /// For `run` and `acquire`: each call opens the database afresh, creates the tables if
  /// missing and makes a locker of the strategy; the database stays open in the context.
  /// A bad DSN or option throws FatalError here, before any attempt.
  OpenLocker locker_opener(Strategy strategy, std::optional<Millis> ttl, int slots = 0);

 private:
  std::optional<DsnSetting> dsn_setting_;
  std::optional<Dsn> dsn_;
  // No DSN given: the state directory of the default location, whose directories we may create
  // and which must be private (BackendOptions::private_root); empty for a DSN someone gave.
  std::string default_state_dir_;
  std::unique_ptr<Backend> locking_backend_;  // the database the last locker_opener call opened
};

/// Turns a failed Result into a FatalError carrying its kind and message.
template <class T>
T value_or_throw(Result<T>&& result) {
  if (!result) throw FatalError{result.error()};
  if constexpr (!std::is_void_v<T>) return std::move(*result);
}

/// Throws FatalError(usage) for a bad duration string; the option name prefixes the message.
Millis duration_option(const std::string& option, const std::string& text);

/// A file holding a password (config file, DSN file; `what` names it in messages) must be
/// private: warns, naming its mode, when its group or others may read it. With
/// `refuse_foreign`, a mode wider than 0600 on a file another user owns is FatalError (config).
void check_private_file(const std::string& what, const std::string& path, bool refuse_foreign);

/// A file that configures dblock (config file, DSN file) is trusted the way ssh trusts
/// authorized_keys: FatalError (config) when a user other than root and this one owns it, when
/// its group or others may write it, or when a directory above it (as named, and as resolved)
/// could be changed by another user (one not sticky and writable by group or others, or owned
/// by another user). `st` is the file as opened.
void check_trusted_file(const std::string& what, const std::string& path, const struct stat& st);

/// The default holder identity: user@host:pid:random (user: the effective user's name).
std::string default_owner();
/// This host's name.
std::string host_name();

}  // namespace dblock::cli

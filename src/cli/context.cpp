#include "cli/context.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "backends/common/trusted_file.hpp"
#include "backends/registry.hpp"
#include "core/duration.hpp"
#include "core/key.hpp"
#include "core/log.hpp"
#include "core/semaphore.hpp"
#include "core/sql/shedlock.hpp"

namespace dblock::cli {
namespace {

// source: where the file's name came from (--dsn-file, DBLOCK_DSN_FILE or a config file's
// line), so the message points at the setting to fix.
std::string read_dsn_file(const std::string& path, const std::string& source) {
  if (path.empty()) throw FatalError{{ErrorKind::config, source + ": the DSN file name is empty"}};
  // Read through the descriptor that was checked, so the file judged is the file read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  struct stat st{};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    int err = errno;
    if (fd >= 0) ::close(fd);
    throw FatalError{{ErrorKind::config, "cannot read " + source + " " + path + ": " + std::strerror(err)}};
  }
  std::string content;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw FatalError{{ErrorKind::config, "cannot read " + source + " " + path + ": " + std::strerror(err)}};
    }
    content.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  // Whoever may write the file chooses the database, and so who runs the job.
  check_trusted_file("DSN file " + path, path, st);
  std::istringstream in(content);
  std::string line;
  // The first non-empty, non-comment line is the DSN; trailing whitespace (a final newline) is not part of it.
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    std::size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    std::string dsn = line.substr(start);
    // The file's owner decides who may read it: one owned by another user and open to more
    // than its owner is refused, as this user cannot make it private.
    if (redact_dsn(dsn) != dsn) check_private_file("DSN file " + path, path, true);
    return dsn;
  }
  throw FatalError{{ErrorKind::config, source + " " + path + " holds no DSN"}};
}

// An empty DSN is refused wherever it comes from: `-d "$DSN"` with DSN unset must not fall back
// to the local default, where every host of a farm would take its own lock.
std::string non_empty_dsn(std::string text, const std::string& source) {
  if (!text.empty()) return text;
  const auto location = default_location();
  throw FatalError{{ErrorKind::config, source + ": the DSN is empty (an unset variable?); give one, or leave the "
                                                "setting out for the default " +
                                                (location ? location->dsn : std::string("SQLite database"))}};
}

// Once a password is in memory, a core dump (or a ptrace attach by the same user) would show
// it: dblock(1), DSN. Undone for the command of run by its exec.
void disable_core_dumps() { ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

// A DSN file's name as the command of run gets it: absolute, as the command may change
// directory (as given when the working directory is gone).
std::string absolute_name(const std::string& path) {
  std::error_code ec;
  auto absolute = std::filesystem::absolute(path, ec);
  return ec ? path : absolute.string();
}

// Inside `dblock run`, which keeps its DSN text out of the command's environment, a dblock
// given no DSN of its own would otherwise lock in another database without a word: a host's
// local default file, where every host of a farm gets token 1. A config file's or the
// default DSN passes only when it is the run's own database (compared with passwords hidden).
void check_enclosing_run(const std::string& text, const std::string& where) {
  const char* run_database = std::getenv(run_database_env);
  if (!run_database || !*run_database || redact_dsn(text) == run_database) return;
  throw FatalError{{ErrorKind::config,
                    "this dblock runs inside 'dblock run' on " + std::string(run_database) + " (" + run_database_env +
                        ") and would use " + where + " (" + redact_dsn(text) +
                        "), another database: refused. run keeps its DSN text out of its command's environment; "
                        "give the outer run its DSN in a file (--dsn-file or DBLOCK_DSN_FILE), whose name its "
                        "command inherits, or give this dblock --dsn-file FILE or -d DSN (-d sqlite:/PATH for a "
                        "lock of its own)"}};
}

}  // namespace

std::optional<std::string> credential_dsn_file() {
  const char* dir = std::getenv("CREDENTIALS_DIRECTORY");
  if (!dir || !*dir) return std::nullopt;
  std::string path = std::string(dir) + "/dblock-dsn";
  struct stat st{};
  // A file there that cannot be read is still the unit's DSN: read_dsn_file says why it failed.
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
  return path;
}

const DsnSetting& Context::dsn_setting() {
  if (dsn_setting_) return *dsn_setting_;
  // Command line and config file arrive in options (the file only when neither the command
  // line nor the environment named a DSN); the environment comes next; then the default. A
  // setting that is present but empty counts as given.
  DsnSetting s;
  if (!options.dsn_from.empty()) {
    s.text = non_empty_dsn(options.dsn, options.dsn_from);
    if (options.dsn_in_config) check_enclosing_run(s.text, options.dsn_from);
  } else if (!options.dsn_file_from.empty()) {
    s.text = read_dsn_file(options.dsn_file, options.dsn_file_from);
    s.file = absolute_name(options.dsn_file);
    if (options.dsn_in_config) check_enclosing_run(s.text, options.dsn_file_from + " " + options.dsn_file);
  } else if (const char* env = std::getenv("DBLOCK_DSN")) {
    s.text = non_empty_dsn(env, "DBLOCK_DSN");
  } else if (const char* env_file = std::getenv("DBLOCK_DSN_FILE")) {
    s.text = read_dsn_file(env_file, "DBLOCK_DSN_FILE");
    s.file = absolute_name(env_file);
  } else if (auto credential = credential_dsn_file()) {
    // A unit's credential (dblock(1), DSN): a dblock inside the command of a run on another
    // database, which inherits CREDENTIALS_DIRECTORY, must not switch to it.
    s.text = read_dsn_file(*credential, "the systemd credential dblock-dsn ($CREDENTIALS_DIRECTORY)");
    s.file = absolute_name(*credential);
    check_enclosing_run(s.text, "the systemd credential " + *credential);
  } else {
    auto location = value_or_throw(default_location());
    check_enclosing_run(location.dsn, "the default database");
    s.text = location.dsn;
    default_state_dir_ = location.state_dir;
  }
  return *(dsn_setting_ = std::move(s));
}

const Dsn& Context::dsn() {
  if (dsn_) return *dsn_;
  dsn_ = value_or_throw(parse_dsn(dsn_setting().text));
  if (dsn_->has_password()) disable_core_dumps();
  return *dsn_;
}

std::vector<std::pair<std::string, std::string>> Context::database_env_for_command() {
  const DsnSetting& s = dsn_setting();
  std::vector<std::pair<std::string, std::string>> env{{run_database_env, redact_dsn(s.text)}};
  // A file's name is no secret: a dblock inside the command reads the same file.
  if (!s.file.empty()) env.emplace_back("DBLOCK_DSN_FILE", s.file);
  return env;
}

Strategy Context::strategy() const {
  auto s = parse_strategy(options.strategy);
  if (!s)
    throw FatalError{{ErrorKind::usage, "unknown strategy '" + options.strategy +
                                            "' (use lease, advisory, for-update or txn-insert)"}};
  // A ShedLock row is a lease: exit 78 with the reason for any other strategy.
  if (options.table_format == "shedlock" && *s != Strategy::lease)
    throw FatalError{{ErrorKind::config, shedlock::lease_only}};
  return *s;
}

BackendOptions Context::backend_options(std::optional<Millis> ttl) const {
  value_or_throw(validate_table_prefix(options.table_prefix));
  if (options.history_keep < 1)
    throw FatalError{{ErrorKind::usage, "--history-keep must be at least 1"}};
  BackendOptions b;
  b.table_prefix = options.table_prefix;
  b.history_keep = options.history_keep;
  if (options.table_format == "shedlock") {
    // The table name passes the prefix's identifier rule (the name length is the database's).
    if (auto ok = validate_table_prefix(options.table); !ok || options.table.empty())
      throw FatalError{{ErrorKind::usage, "invalid --table '" + options.table +
                                              "': only letters, digits and _ are allowed, not starting with a digit"}};
    b.shedlock = true;
    b.shedlock_table = options.table;
  }
  b.connect_timeout = duration_option("--connect-timeout", options.connect_timeout);
  // Every caller has read dsn() first. Only the default location gets its directories made.
  b.create_directories = !default_state_dir_.empty();
  b.private_root = default_state_dir_;
  if (ttl) {
    // A statement may take at most a quarter of the lease, so a renewal that hangs still
    // leaves time for a retry and the kill grace before the lease can expire.
    b.io_timeout = std::clamp(*ttl / 4, Millis(1000), Millis(10000));
    // The heartbeat touches a holder's session every ttl/3, so a healthy holder never gets near
    // this; one stopped (SIGSTOP) for up to 2 x ttl keeps its lock, and one cut off from the
    // server loses it on the server within 2 x ttl + 5 s instead of TCP's hours.
    b.session_idle_limit = std::chrono::ceil<std::chrono::seconds>(2 * *ttl + Millis(5000));
  }
  return b;
}

std::unique_ptr<Backend> Context::open(std::optional<Millis> ttl, bool ensure_schema) {
  const Dsn& d = dsn();
  log::verbose("database " + d.redacted);
  auto backend = value_or_throw(open_backend(d, backend_options(ttl)));
  if (ensure_schema) value_or_throw(backend->ensure_schema());
  return backend;
}

Result<std::unique_ptr<Backend>> Context::try_open_for_inspection() {
  const Dsn& d = dsn();
  log::verbose("database " + d.redacted + " (read-only)");
  BackendOptions b = backend_options();
  b.inspect = true;
  return open_backend(d, b);
}

std::unique_ptr<Backend> Context::open_for_inspection() { return value_or_throw(try_open_for_inspection()); }

OpenLocker Context::locker_opener(Strategy strategy, std::optional<Millis> ttl, int slots) {
  const Dsn& d = dsn();
  BackendOptions b = backend_options(ttl);
  b.locker_strategy = strategy;
  if (slots > 0 && b.shedlock)
    throw FatalError{{ErrorKind::config, "--slots cannot be used with --table-format shedlock: ShedLock's table has "
                                         "one row per name, so one holder (use dblock's own tables for a semaphore)"}};
  log::verbose("database " + d.redacted);
  return [this, &d, b, strategy, slots]() -> Result<std::unique_ptr<Locker>> {
    // Called again after a connection error: nothing of the old connection is reused.
    locking_backend_.reset();
    auto backend = open_backend(d, b);
    if (!backend) return std::unexpected(backend.error());
    // No schema check on the hot path: the locker assumes the tables and creates them when a
    // statement reports them missing (src/core/backend.hpp, make_locker).
    auto locker = (*backend)->make_locker(strategy);
    if (!locker) return std::unexpected(locker.error());
    locking_backend_ = std::move(*backend);
    if (slots > 0) return make_semaphore_locker(std::move(*locker), slots);
    return locker;
  };
}

void check_private_file(const std::string& what, const std::string& path, bool refuse_foreign) {
  struct stat st{};
  if (stat(path.c_str(), &st) != 0) return;
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  if (refuse_foreign && (st.st_mode & 0177) != 0 && st.st_uid != geteuid())
    throw FatalError{{ErrorKind::config, what + " holds a password, has mode " + mode + " and belongs to uid " +
                                             std::to_string(st.st_uid) +
                                             ", not to this user: refused (its owner should chmod 600 it)"}};
  if (st.st_mode & (S_IRGRP | S_IROTH))
    log::warn(what + " holds a password and is readable by other users (mode " + mode + "; chmod 600 it)");
}

void check_trusted_file(const std::string& what, const std::string& path, const struct stat& st) {
  value_or_throw(trusted_file(what, path, st));
}

Millis duration_option(const std::string& option, const std::string& text) {
  auto d = parse_duration(text);
  if (!d) throw FatalError{{ErrorKind::usage, option + ": " + d.error().message}};
  return *d;
}

std::string config_not_read_reason(const GlobalOptions& options) {
  if (!options.config_chosen_by.empty())
    return options.config_chosen_by + (options.config_file.empty() ? " names none" : " names " + options.config_file);
  return "only the first config file that exists is read, " + options.config_file +
         "; files are not layered (dblock(1), FILES)";
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string default_owner() {
  // The Unix user first: on one machine several users' crontabs share a database, and the
  // host and pid alone do not say whose job holds the key. Only text: no reader of any
  // version parses an owner, so rows stay readable both ways (dblock(1), run --owner).
  std::string user = "uid" + std::to_string(::geteuid());
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* found = nullptr;
  if (::getpwuid_r(::geteuid(), &entry, buffer.data(), buffer.size(), &found) == 0 && found && *found->pw_name)
    user = found->pw_name;
  // getrandom(2), not std::random_device and an ostringstream: those two cost a run about
  // 40 us of CPU (the stream's locale set-up; docs/performance.md, SQLite).
  std::uint32_t random = 0;
  if (::getrandom(&random, sizeof random, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof random))
    random = std::random_device{}();
  char hex[16];
  const auto end = std::to_chars(hex, hex + sizeof hex, random & 0xffffffu, 16).ptr;
  return user + '@' + host_name() + ':' + std::to_string(::getpid()) + ':' + std::string(hex, end);
}

}  // namespace dblock::cli

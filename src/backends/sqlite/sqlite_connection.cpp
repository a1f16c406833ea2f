#include "backends/sqlite/sqlite_connection.hpp"

#include "backends/common/identifiers.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <memory>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "backends/common/dsn.hpp"
#include "backends/sqlite/sqlite_vfs.hpp"
#include "core/clock.hpp"

namespace dblock::sqlite {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};
using FileHandle = std::unique_ptr<std::FILE, FileCloser>;

constexpr const char* timestamp_format = "'%Y-%m-%d %H:%M:%f'";

std::string parent_dir(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

/// mkdir -p with mode 0755; an existing directory is fine.
Result<void> make_dirs(const std::string& path, const std::string& db_path) {
  std::string partial;
  std::size_t pos = 0;
  while (pos <= path.size()) {
    std::size_t next = path.find('/', pos);
    if (next == std::string::npos) next = path.size();
    partial = path.substr(0, next);
    pos = next + 1;
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0755) == 0) continue;
    int err = errno;
    struct stat st{};
    if (err == EEXIST && ::stat(partial.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
    if (err == EEXIST) err = ENOTDIR;
    return fail(ErrorKind::connection, "cannot create the directory " + partial + " for the SQLite database " +
                                           db_path + ": " + std::strerror(err));
  }
  return {};
}

/// Only the default location gets its directory made; a missing directory in a DSN someone
/// wrote is most likely a typo, which must not become a second, empty lock database.
Result<void> check_directory(const std::string& path, bool create) {
  const std::string dir = parent_dir(path);
  if (create) return make_dirs(dir, path);
  struct stat st{};
  const bool exists = ::stat(dir.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) return {};
  const std::string why = exists            ? " is not a directory"
                          : errno == ENOENT ? " does not exist"
                                            : std::string(" is unusable: ") + std::strerror(errno);
  return fail(ErrorKind::config,
              "the directory " + dir + " of the SQLite database " + path + why + " (create it, or fix the DSN)");
}

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

/// Refuses (ErrorKind::config) a path on which another user could put a database of their own:
/// a symlink someone else made in a sticky world-writable directory such as /tmp (the kernel's
/// fs.protected_symlinks rule, whatever the sysctl says), and for the default location
/// (`private_root` not empty) any part, from the file up to private_root, that is not owned by
/// this user or root or that others may write: the rule ssh(1) applies to ~/.ssh. A part that
/// does not exist yet is made by this user, in a directory only it may write.
Result<void> check_path_owners(const std::string& path, const std::string& private_root) {
  const uid_t me = ::geteuid();
  auto refuse = [&](const std::string& part, const std::string& why) {
    return fail(ErrorKind::config, "refusing the SQLite database " + path + ": " + part + " " + why);
  };
  bool in_private_part = !private_root.empty();
  for (std::string part = path;; part = parent_dir(part)) {
    struct stat entry{};
    if (::lstat(part.c_str(), &entry) == 0 && S_ISLNK(entry.st_mode) && entry.st_uid != me && entry.st_uid != 0) {
      const std::string dir = parent_dir(part);
      struct stat parent{};
      if (::stat(dir.c_str(), &parent) == 0 && (parent.st_mode & S_ISVTX) && (parent.st_mode & S_IWOTH) &&
          entry.st_uid != parent.st_uid)
        return refuse(part, "is a symlink that uid " + std::to_string(entry.st_uid) +
                                " made in the world-writable directory " + dir + ": it is not followed");
    }
    struct stat target{};
    if (in_private_part && ::stat(part.c_str(), &target) == 0) {
      const std::string anyway = " (the default location must be yours; give a DSN naming it to use it anyway)";
      if (target.st_uid != me && target.st_uid != 0)
        return refuse(part, "is owned by uid " + std::to_string(target.st_uid) + anyway);
      if (target.st_mode & (S_IWGRP | S_IWOTH))
        return refuse(part, "may be written by others (mode " + octal_mode(target.st_mode) + ")" + anyway);
    }
    if (part == private_root) in_private_part = false;
    if (part == "/" || part == ".") return {};
  }
}

std::string user_name(uid_t uid) {
  std::array<char, 1024> buf{};
  struct passwd pw{};
  struct passwd* found = nullptr;
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found) return found->pw_name;
  return "uid " + std::to_string(uid);
}

std::string group_name(gid_t gid) {
  std::array<char, 4096> buf{};
  struct group gr{};
  struct group* found = nullptr;
  if (::getgrgid_r(gid, &gr, buf.data(), buf.size(), &found) == 0 && found) return found->gr_name;
  return std::to_string(gid);
}

bool in_group(gid_t gid) {
  if (::getegid() == gid) return true;
  const int count = ::getgroups(0, nullptr);
  if (count <= 0) return false;
  std::vector<gid_t> groups(static_cast<std::size_t>(count));
  const int got = ::getgroups(count, groups.data());
  return got > 0 && std::find(groups.begin(), groups.begin() + got, gid) != groups.begin() + got;
}

/// Why this user may not do `what` ("enter", "write", "read") to `name`, and the command that
/// lets it: the reason is the part's mode, owner and group, as ls -l would show them, and the
/// fix is the chmod its owner or root runs on `files`, or the group this user must join.
std::string denied(const std::string& name, const std::string& what, const char* bits, const std::string& files) {
  const std::string me = user_name(::geteuid());
  std::string text = "user " + me + " may not " + what + " " + name;
  struct stat st{};
  if (::stat(name.c_str(), &st) != 0) return text + ": " + std::strerror(EACCES);
  const std::string owner = user_name(st.st_uid);
  const std::string group = group_name(st.st_gid);
  text += " (mode " + octal_mode(st.st_mode) + ", owner " + owner + ", group " + group + "): " + std::strerror(EACCES);
  if (st.st_uid == ::geteuid()) return text + "; fix: chmod u+" + bits + " " + files;
  const std::string as = st.st_uid == 0 ? "root" : owner + " or root";
  if (in_group(st.st_gid)) return text + "; fix, as " + as + ": chmod g+" + bits + " " + files;
  return text + "; fix, as root: add " + me + " to group " + group + " (usermod -aG " + group + " " + me +
         "), or give " + files + " a group " + me + " is in and chmod g+" + bits +
         " (dblock(1), SHARING A DATABASE FILE)";
}

/// The first directory on the way to `dir`, from the root down, that this user may not enter.
/// A part that is missing or no directory ends the search: check_directory names it.
std::optional<std::string> closed_directory(const std::string& dir) {
  std::vector<std::string> parts;
  for (std::string part = dir;; part = parent_dir(part)) {
    parts.push_back(part);
    if (part == "/" || part == ".") break;
  }
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    struct stat st{};
    if (::stat(it->c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
    if (::access(it->c_str(), X_OK) != 0 && errno == EACCES) return *it;
  }
  return std::nullopt;
}

/// A directory on the way that this user may not enter: ErrorKind::config naming it and the fix.
Result<void> check_reachable(const std::string& path) {
  auto closed = closed_directory(parent_dir(path));
  if (!closed) return {};
  return fail(ErrorKind::config,
              "cannot reach the SQLite database " + path + ": " + denied(*closed, "enter the directory", "x", *closed));
}

/// The database and those of its -wal and -shm that exist, for a chmod that shares them all.
std::string database_files(const std::string& path) {
  std::string files = path;
  for (const char* suffix : {"-wal", "-shm"})
    if (::access((path + suffix).c_str(), F_OK) == 0) files += " " + path + suffix;
  return files;
}

/// Permission denied is the setup's to fix: ErrorKind::config (exit 78) with `denial` (from
/// denied(): who, what, and the fix). Any other reason (a read-only file system, an I/O error)
/// leaves the database unusable: ErrorKind::connection with the OS's words.
std::unexpected<Error> access_error(int err, const std::string& doing, const std::string& denial) {
  if (err == EACCES || err == EPERM) return std::unexpected(Error{ErrorKind::config, doing + ": " + denial});
  return std::unexpected(Error{ErrorKind::connection, doing + ": " + std::strerror(err)});
}

/// Fails early, with the OS's reason and the fix, where SQLite would only say "unable to open":
/// a directory on the way this user may not enter, a database, -wal or -shm it may not write,
/// or a directory it may not write when the database or its -wal or -shm must be created there.
Result<void> check_writable(const std::string& path, bool create_directories) {
  const std::string dir = parent_dir(path);
  if (auto ok = check_reachable(path); !ok) return ok;
  if (auto ok = check_directory(path, create_directories); !ok) return ok;
  std::string missing;
  for (const std::string& file : {path, path + "-wal", path + "-shm"}) {
    if (::access(file.c_str(), F_OK) != 0) {
      if (missing.empty()) missing = file;
      continue;
    }
    if (::access(file.c_str(), R_OK | W_OK) == 0) continue;
    const int err = errno;
    return access_error(err, "cannot write the SQLite database " + path,
                        denied(file, "write", "rw", database_files(path)));
  }
  if (missing.empty() || ::access(dir.c_str(), W_OK | X_OK) == 0) return {};
  const int err = errno;
  const bool database = missing == path;
  const std::string doing = database ? "cannot create the SQLite database " + path
                                     : "cannot create " + missing + ", which the SQLite database " + path + " needs";
  // g+ws: setgid, so that what is created there takes the directory's group, not the creator's.
  std::string denial = denied(dir, "write the directory", "ws", dir);
  if (database) denial += "; or let a user who may write there create it (umask 002; dblock init)";
  return access_error(err, doing, denial);
}

/// Creates a missing database file, so that it gets the mode open(2) gives: 0666 less the umask
/// (SQLite would make it 0644 whatever the umask), which with umask 002 makes it writable by
/// its group, and SQLite gives its -wal and -shm the file's mode. In a setgid directory the
/// group is the directory's. The default location (`private_default`) stays 0644 less the umask.
Result<void> create_database_file(const std::string& path, bool private_default) {
  const mode_t mode = private_default ? 0644 : 0666;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd >= 0) {
    ::close(fd);
    return {};
  }
  const int err = errno;
  if (err == EEXIST) return {};  // another process made it first
  return access_error(err, "cannot create the SQLite database " + path, std::strerror(err));
}

/// file: URI of an absolute path, for the immutable fallback: '?', '#' and '%' escaped.
std::string file_uri(const std::string& path, std::string_view query) {
  std::string uri = "file:";
  for (char c : path) {
    if (c == '?' || c == '#' || c == '%') {
      constexpr const char* hex = "0123456789ABCDEF";
      uri += '%';
      uri += hex[(static_cast<unsigned char>(c) >> 4) & 0xF];
      uri += hex[static_cast<unsigned char>(c) & 0xF];
    } else {
      uri += c;
    }
  }
  return uri + "?" + std::string(query);
}

Result<DbHandle> open_handle(const std::string& path, const std::string& name, int flags, const char* vfs) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(name.c_str(), &raw, flags, vfs);
  DbHandle db(raw);
  if (rc != SQLITE_OK) {
    std::string reason = db ? sqlite3_errmsg(db.get()) : sqlite3_errstr(rc);
    if (int err = db ? sqlite3_system_errno(db.get()) : 0; err != 0) reason += std::string(": ") + std::strerror(err);
    return std::unexpected(Error{ErrorKind::connection, "cannot open the SQLite database " + path + ": " + reason,
                                 db ? sqlite3_extended_errcode(db.get()) : rc});
  }
  return db;
}

// dblock_boot_ms(): CLOCK_BOOTTIME in ms, the clock leases are judged on (a wall-clock step
// cannot move it). dblock_boot_id(): this boot's id, or NULL when the kernel does not say.
void sql_boot_ms(sqlite3_context* ctx, int, sqlite3_value**) { sqlite3_result_int64(ctx, boottime_now().count()); }
void sql_boot_id(sqlite3_context* ctx, int, sqlite3_value**) {
  const auto& id = boot_id();
  if (id) sqlite3_result_text(ctx, id->data(), static_cast<int>(id->size()), SQLITE_STATIC);
  else sqlite3_result_null(ctx);
}

// About one checkpoint every 25 runs: its two fsyncs and the next commit's WAL header fsync
// spread over them, and at most ~500 KB of WAL to read when a process opens the file.
constexpr int wal_autocheckpoint_pages = 128;

}  // namespace

std::string epoch_ms_sql(std::string_view expr) {
  const std::string e(expr);
  return "(CAST(strftime('%s', " + e + ") AS INTEGER) * 1000 + CAST(substr(strftime('%f', " + e +
         "), 4, 3) AS INTEGER))";
}

std::string now_sql() { return std::string("strftime(") + timestamp_format + ", 'now')"; }

// julianday arithmetic is rounded back to whole milliseconds by strftime, so the offset is exact.
std::string now_plus_sql(std::string_view ms_param) {
  return std::string("strftime(") + timestamp_format + ", julianday('now') + " + std::string(ms_param) +
         " / 86400000.0)";
}

std::string quote_ident(std::string_view name) { return quote_identifier(name, '"'); }

void Statement::bind(int index, std::string_view text) {
  sqlite3_bind_text(stmt_.get(), index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}
void Statement::bind(int index, std::int64_t value) { sqlite3_bind_int64(stmt_.get(), index, value); }
void Statement::bind_null(int index) { sqlite3_bind_null(stmt_.get(), index); }
void Statement::bind(int index, const std::optional<std::int64_t>& value) {
  if (value) bind(index, *value);
  else bind_null(index);
}
void Statement::bind(int index, const std::optional<std::string>& value) {
  if (value) bind(index, std::string_view(*value));
  else bind_null(index);
}

Result<bool> Statement::step(std::string_view doing) {
  int rc = sqlite3_step(stmt_.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return std::unexpected(make_error(*conn_, rc, doing));
}

Result<void> Statement::run(std::string_view doing) {
  for (;;) {
    auto row = step(doing);
    if (!row) return std::unexpected(row.error());
    if (!*row) return {};
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_.get());
  sqlite3_clear_bindings(stmt_.get());
}

bool Statement::is_null(int column) const { return sqlite3_column_type(stmt_.get(), column) == SQLITE_NULL; }
std::int64_t Statement::int64(int column) const { return sqlite3_column_int64(stmt_.get(), column); }
std::optional<std::int64_t> Statement::opt_int64(int column) const {
  if (is_null(column)) return std::nullopt;
  return int64(column);
}
std::string Statement::text(int column) const {
  const unsigned char* data = sqlite3_column_text(stmt_.get(), column);
  if (!data) return {};
  return std::string(reinterpret_cast<const char*>(data),
                     static_cast<std::size_t>(sqlite3_column_bytes(stmt_.get(), column)));
}

Result<Connection> Connection::open(const std::string& path, Millis busy_timeout, OpenMode mode) {
  if (auto ok = check_path_owners(path, mode.private_root); !ok) return std::unexpected(ok.error());
  if (mode.read_only) return open_read_only(path, busy_timeout, mode.create_directories);
  if (auto ok = check_writable(path, mode.create_directories); !ok) return std::unexpected(ok.error());
  if (auto ok = create_database_file(path, !mode.private_root.empty()); !ok) return std::unexpected(ok.error());
  auto db = open_handle(path, path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, dblock_vfs());
  if (!db) return std::unexpected(db.error());
  Connection conn(std::move(*db), path, busy_timeout);
  if (auto ok = conn.configure(); !ok) return std::unexpected(ok.error());
  return conn;
}

Result<Connection> Connection::open_read_only(const std::string& path, Millis busy_timeout, bool default_location) {
  if (auto ok = check_reachable(path); !ok) return std::unexpected(ok.error());
  if (::access(path.c_str(), F_OK) != 0) {
    const int err = errno;
    if (err != ENOENT)
      return fail(ErrorKind::connection, "cannot read the SQLite database " + path + ": " + std::strerror(err));
    // The default location may simply not exist yet; a written DSN with a missing directory
    // is a typo and says which directory.
    if (!default_location)
      if (auto dir = check_directory(path, false); !dir) return std::unexpected(dir.error());
    return no_lock_database(path);
  }
  if (::access(path.c_str(), R_OK) != 0) {
    const int err = errno;
    return access_error(err, "cannot read the SQLite database " + path, denied(path, "read", "r", path));
  }
  auto db = open_handle(path, path, SQLITE_OPEN_READONLY, dblock_vfs());
  if (!db) return std::unexpected(db.error());
  Connection conn(std::move(*db), path, busy_timeout);
  if (auto ok = conn.configure_functions(); !ok) return std::unexpected(ok.error());
  // The first read maps the WAL index. A reader needs the -shm and -wal files to exist or to
  // be creatable (SQLite, "Read-Only Databases" in wal.html); a read-only -shm is fine. A user
  // who may not write the directory, inspecting a database whose last writer left no -wal,
  // gets SQLITE_CANTOPEN or SQLITE_READONLY_* here. With no -wal every commit is in the main
  // file, so it is read as immutable (no locks, no -shm): a snapshot, which is all status and
  // history give; a writer that starts meanwhile appends to a new -wal, and the main file
  // changes only at a checkpoint, 128 pages later.
  auto read = conn.exec("SELECT count(*) FROM sqlite_master", "reading the database");
  if (read) return conn;
  const int primary = read.error().native_code & 0xff;
  if ((primary != SQLITE_CANTOPEN && primary != SQLITE_READONLY) || ::access((path + "-wal").c_str(), F_OK) == 0)
    return std::unexpected(read.error());
  auto immutable = open_handle(path, file_uri(path, "immutable=1"), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr);
  if (!immutable) return std::unexpected(immutable.error());
  Connection fallback(std::move(*immutable), path, busy_timeout);
  fallback.immutable_ = true;
  if (auto ok = fallback.configure_functions(); !ok) return std::unexpected(ok.error());
  return fallback;
}

Result<void> Connection::configure_functions() const {
  sqlite3_extended_result_codes(db_.get(), 1);
  // DIRECTONLY: only dblock's own statements may read the clock, never a trigger or view
  // someone stored in the file.
  for (auto [name, fn] : {std::pair{"dblock_boot_ms", &sql_boot_ms}, std::pair{"dblock_boot_id", &sql_boot_id}}) {
    int rc = sqlite3_create_function_v2(db_.get(), name, 0, SQLITE_UTF8 | SQLITE_DIRECTONLY, nullptr, fn, nullptr,
                                        nullptr, nullptr);
    if (rc != SQLITE_OK) return std::unexpected(make_error(*this, rc, "registering the boot clock functions"));
  }
  // The busy handler makes concurrent processes queue for the write lock instead of seeing
  // "database is locked"; io_timeout bounds how long one statement may wait.
  sqlite3_busy_timeout(db_.get(), static_cast<int>(std::min<std::int64_t>(busy_timeout_.count(), INT_MAX)));
  return {};
}

Result<void> Connection::configure() const {
  if (auto ok = configure_functions(); !ok) return ok;

  auto mode = journal_mode();
  if (!mode) return std::unexpected(mode.error());
  // Switching to WAL needs the exclusive lock and may report busy without waiting when other
  // processes open the same new file at once, so retry within the busy timeout.
  const Millis deadline = boottime_now() + busy_timeout_;
  if (*mode != "wal") {
    // Switching writes the file header through a rollback journal: four fsyncs on a new file.
    // A new, empty file has nothing a power loss could damage (the next open switches again),
    // so that write goes unsynced; a file with content keeps the default until FULL below.
    auto pages = prepare("PRAGMA page_count");
    if (!pages) return std::unexpected(pages.error());
    auto row = pages->step("reading the size of the database");
    if (!row) return std::unexpected(row.error());
    if (*row && pages->int64(0) == 0)
      if (auto ok = exec("PRAGMA synchronous=OFF", "switching a new file to WAL"); !ok) return ok;
  }
  while (*mode != "wal") {
    auto stmt = prepare("PRAGMA journal_mode=WAL");
    if (!stmt) return std::unexpected(stmt.error());
    int rc = stmt->step_code();
    if (rc == SQLITE_ROW) {
      *mode = stmt->text(0);
      break;  // a file system without shared memory stays in its old mode; doctor reports it
    }
    if ((rc & 0xff) != SQLITE_BUSY || boottime_now() >= deadline)
      return std::unexpected(make_error(*this, rc, "switching to WAL journal mode"));
    std::this_thread::sleep_for(Millis(20));
  }
  // FULL: a committed acquisition (its fencing token) must survive a power loss, or a token
  // could be handed out twice. In WAL mode that is one fsync of the WAL per commit.
  if (auto ok = exec("PRAGMA synchronous=FULL", "setting synchronous=FULL"); !ok) return ok;
  // The last connection to close would checkpoint the WAL into the database and delete it: two
  // more fsyncs, and the next process recreates the WAL (a directory fsync and a header
  // fsync), five of a `run`'s seven. Closing leaves the WAL instead; SQLite's auto-checkpoint
  // (every wal_autocheckpoint pages, on a commit) moves it into the database, so the WAL
  // stays bounded and an occasional run pays the checkpoint's fsyncs.
  int rc = sqlite3_db_config(db_.get(), SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, static_cast<int*>(nullptr));
  if (rc != SQLITE_OK) return std::unexpected(make_error(*this, rc, "keeping the WAL on close"));
  // The first process to open the file after the others closed it rebuilds the WAL index by
  // reading the WAL written since the last checkpoint, so that WAL is kept short: a checkpoint
  // every wal_autocheckpoint_pages (a run writes about 5 pages; SQLite's default of 1000 would
  // make every process read up to 4 MB when it starts).
  return exec("PRAGMA wal_autocheckpoint=" + std::to_string(wal_autocheckpoint_pages), "setting wal_autocheckpoint");
}

Result<std::string> Connection::journal_mode() const {
  if (immutable_) {
    // An immutable connection reports "delete" whatever the file says; the header's read and
    // write versions (offsets 18 and 19) are 2 for WAL (SQLite's file format, "Database Header").
    unsigned char versions[2] = {};
    FileHandle file(std::fopen(path_.c_str(), "rb"));
    if (file && std::fseek(file.get(), 18, SEEK_SET) == 0 && std::fread(versions, 1, 2, file.get()) == 2)
      return std::string(versions[0] == 2 && versions[1] == 2 ? "wal" : "delete");
    return fail(ErrorKind::connection, "cannot read the header of " + path_ + ": " + std::strerror(errno));
  }
  auto stmt = prepare("PRAGMA journal_mode");
  if (!stmt) return std::unexpected(stmt.error());
  auto row = stmt->step("reading the journal mode");
  if (!row) return std::unexpected(row.error());
  return *row ? stmt->text(0) : std::string();
}

Result<Statement> Connection::prepare(std::string_view sql) const {
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v2(db_.get(), sql.data(), static_cast<int>(sql.size()), &raw, nullptr);
  StmtHandle stmt(raw);
  if (rc != SQLITE_OK) return std::unexpected(make_error(*this, rc, "preparing a statement"));
  return Statement(*this, std::move(stmt));
}

Result<void> Connection::exec(const std::string& sql, std::string_view doing) const {
  int rc = sqlite3_exec(db_.get(), sql.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return std::unexpected(make_error(*this, rc, doing));
  return {};
}

Result<Transaction> Transaction::begin_immediate(const Connection& conn, std::string_view doing) {
  if (auto ok = conn.exec("BEGIN IMMEDIATE", doing); !ok) return std::unexpected(ok.error());
  return Transaction(conn);
}

Result<void> Transaction::commit(std::string_view doing) {
  auto ok = conn_->exec("COMMIT", doing);
  if (ok) conn_ = nullptr;
  return ok;
}

Transaction::~Transaction() {
  if (conn_ && !sqlite3_get_autocommit(conn_->get()))
    sqlite3_exec(conn_->get(), "ROLLBACK", nullptr, nullptr, nullptr);
}

WalWatch::~WalWatch() {
  if (fd_ >= 0) ::close(fd_);
}

int WalWatch::fd() const {
  if (fd_ < 0 && !failed_) {
    fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd_ >= 0 && ::inotify_add_watch(fd_, wal_path_.c_str(), IN_MODIFY) < 0) {
      ::close(fd_);
      fd_ = -1;
    }
    failed_ = fd_ < 0;
  }
  return fd_;
}

void WalWatch::consume() {
  std::array<char, 4096> events;
  while (fd_ >= 0 && ::read(fd_, events.data(), events.size()) > 0) {
  }
}

Result<sql::Rows> Session::run(const sql::Statement& st, const sql::Params& params) {
  // An acquisition must never commit at NORMAL, even after a resync that failed.
  if (auto ok = resync(); !ok) return std::unexpected(ok.error());
  const sql::Compiled& compiled = compiled_.get(st);
  auto values = sql::bind_order(compiled, params, st.id);
  if (!values) return std::unexpected(values.error());
  auto stmt = conn_->prepare(compiled.text);
  if (!stmt) return std::unexpected(stmt.error());
  for (std::size_t i = 0; i < values->size(); ++i) {
    const int index = static_cast<int>(i) + 1;
    const sql::Value& v = *(*values)[i];
    if (const auto* n = std::get_if<std::int64_t>(&v)) stmt->bind(index, *n);
    else if (const auto* text = std::get_if<std::string>(&v)) stmt->bind(index, std::string_view(*text));
    else stmt->bind_null(index);
  }
  sql::Rows rows;
  for (;;) {
    auto row = stmt->step(st.id);
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    std::vector<sql::Rows::Cell> cells;
    for (int c = 0; c < stmt->column_count(); ++c) {
      if (stmt->is_null(c)) cells.emplace_back();
      else cells.emplace_back(stmt->text(c));
    }
    rows.add(std::move(cells));
  }
  // sqlite3_changes() keeps the count of the last INSERT, UPDATE or DELETE: a SELECT counts its rows.
  const bool writes = !sqlite3_stmt_readonly(stmt->handle());
  rows.affected = writes ? sqlite3_changes64(conn_->get()) : static_cast<std::int64_t>(rows.size());
  return rows;
}

Result<void> Session::exec(std::string_view sql) {
  if (sql == begin_unsynced) unsynced_ = true;  // before running it: a BEGIN that fails leaves NORMAL set
  auto ok = conn_->exec(std::string(sql), sql);
  auto synced = resync();
  return ok ? synced : ok;
}

Result<void> Session::resync() {
  // The pragma cannot change inside a transaction: it waits for COMMIT or ROLLBACK.
  if (!unsynced_ || !sqlite3_get_autocommit(conn_->get())) return {};
  if (auto ok = conn_->exec("PRAGMA synchronous=FULL", "setting synchronous=FULL after the release"); !ok) return ok;
  unsynced_ = false;
  return {};
}

}  // namespace dblock::sqlite

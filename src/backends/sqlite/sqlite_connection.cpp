#include "backends/sqlite/sqlite_connection.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

#include "backends/sqlite/sqlite_file.hpp"
#include "backends/common/dsn.hpp"
#include "backends/sqlite/sqlite_vfs.hpp"
#include "core/clock.hpp"
#include "core/sql/identifiers.hpp"
#include "core/sql/schema.hpp"

namespace dblock::sqlite {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};
using FileHandle = std::unique_ptr<std::FILE, FileCloser>;

constexpr const char* timestamp_format = "'%Y-%m-%d %H:%M:%f'";

files::DatabaseFile database_file(const std::string& path) { return {path, "SQLite database", {"-wal", "-shm"}}; }

// One database file, one name. SQLite names its -wal and -shm after the name it opened, and
// the -shm holds the WAL's locks: a process that opens the file by a second name (a hard link)
// or in a directory of its own (the file alone bind-mounted, as `docker run -v FILE:FILE`
// does) neither sees the other's locks nor reads its log, so both hold every key at once and
// the file is corrupted (sqlite.org/howtocorrupt.html, "multiple links to the same file"). A
// symbolic link is resolved by SQLite and is fine. Nothing there yet is fine too.
Result<void> check_one_name(const std::string& path) {
  struct statx st{};
  if (::statx(AT_FDCWD, path.c_str(), 0, STATX_NLINK | STATX_TYPE, &st) != 0 || !S_ISREG(st.stx_mode)) return {};
  auto refuse = [&](const std::string& what, const std::string& fix) {
    return fail(ErrorKind::config, "refusing the SQLite database " + path + ": " + what +
                                       ", and dblock under another name would neither see this name's locks nor "
                                       "read its log (two holders, a corrupt file); " + fix);
  };
  if (st.stx_nlink > 1)
    return refuse("the file has " + std::to_string(st.stx_nlink) + " names (hard links)",
                  "remove the other names (find / -xdev -samefile " + path + ") and use one name everywhere");
  if ((st.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && (st.stx_attributes & STATX_ATTR_MOUNT_ROOT))
    return refuse("the file is mounted on its own (a bind mount of the file, not of its directory)",
                  "mount the directory that holds it instead");
  return {};
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

// dblock_epoch_ms(jd): a julianday() value as epoch milliseconds, the arithmetic of
// CAST(round(jd * 86400000) AS INTEGER) - 210866760000000 done here (round() of SQLite: half
// away from zero), so a statement carries three expression nodes for it instead of eight. Each
// node is dear where it counts: a RETURNING of an upsert is coded for the insert and the update
// (docs/performance.md, SQLite, round five). NULL stays NULL.
void sql_epoch_ms(sqlite3_context* ctx, int, sqlite3_value** argv) {
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return sqlite3_result_null(ctx);
  const double r = sqlite3_value_double(argv[0]) * 86400000.0;
  const auto ms = r >= 0 ? static_cast<sqlite3_int64>(r + 0.5) : -static_cast<sqlite3_int64>(-r + 0.5);
  sqlite3_result_int64(ctx, ms - 210866760000000);
}

// About one checkpoint every 25 runs: its two fsyncs and the next commit's WAL header fsync
// spread over them, and at most ~500 KB of WAL to read when a process opens the file.
constexpr int wal_autocheckpoint_pages = 128;

// The WAL hook, after every commit: past wal_autocheckpoint_pages, a TRUNCATE checkpoint. A
// PASSIVE one (SQLite's auto-checkpoint) copies the log but leaves it in place for the next
// write of the same process to restart; a process that commits once (acquire, renew, release)
// ends first, and the next one to open the file rebuilds the index from the whole log, as if
// nothing had been copied, and appends to it: the log grew by every such process (1.2 MB after
// 100 acquire/renew/release cycles). Emptying the file ends that on every path. The checkpoint
// waits for no one (no busy handler): a writer or reader in the way leaves the log to the next
// commit past the mark, or to that writer, whose process has the index the copy went into.
int checkpoint_hook(void* busy_ms, sqlite3* db, const char* schema, int pages) {
  if (pages < wal_autocheckpoint_pages) return SQLITE_OK;
  sqlite3_busy_handler(db, nullptr, nullptr);
  sqlite3_wal_checkpoint_v2(db, schema, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
  sqlite3_busy_timeout(db, static_cast<int>(reinterpret_cast<std::intptr_t>(busy_ms)));
  return SQLITE_OK;
}

}  // namespace

// SQLite holds a time as whole milliseconds since the Julian epoch; julianday() divides them by
// 86400000.0, which rounding undoes exactly (the error is far below half a millisecond up to the
// year 9999), and 210866760000000 is 1970-01-01 on that scale: dblock_epoch_ms (above) does
// both. A fraction of the expression nodes of strftime('%s') and strftime('%f') joined, which
// every statement's prepare pays for (docs/performance.md, SQLite). 'now' is already whole
// milliseconds, the same for the whole statement, so now_sql() needs no round trip through text.
std::string epoch_ms_sql(std::string_view expr) {
  const std::string e = expr == now_sql() ? std::string("'now'") : std::string(expr);
  return "dblock_epoch_ms(julianday(" + e + "))";
}

// Whole milliseconds from `from` to `to`: one difference of julianday()s, rounded as epoch_ms_sql
// rounds each (two times a millisecond apart differ by far more than the error of either).
std::string ms_between_sql(std::string_view from, std::string_view to) {
  return "CAST(round(86400000 * (julianday(" + std::string(to) + ") - julianday(" + std::string(from) + "))) AS INTEGER)";
}

std::string now_sql() { return std::string("strftime(") + timestamp_format + ", 'now')"; }

// julianday arithmetic is rounded back to whole milliseconds by strftime, so the offset is exact.
std::string now_plus_sql(std::string_view ms_param) {
  return std::string("strftime(") + timestamp_format + ", julianday('now') + " + std::string(ms_param) +
         " / 86400000.0)";
}

std::string quote_ident(std::string_view name) { return quote_identifier(name, '"'); }

namespace {

std::string column_text(sqlite3_stmt* stmt, int column) {
  const unsigned char* data = sqlite3_column_text(stmt, column);
  if (!data) return {};
  return std::string(reinterpret_cast<const char*>(data), static_cast<std::size_t>(sqlite3_column_bytes(stmt, column)));
}

}  // namespace

Result<Connection> Connection::open(const std::string& path, Millis busy_timeout, OpenMode mode) {
  const files::DatabaseFile file = database_file(path);
  if (auto ok = files::check_path_owners(file, mode.private_root); !ok) return std::unexpected(ok.error());
  if (mode.read_only) return open_read_only(path, busy_timeout, mode.create_directories);
  if (auto ok = files::check_writable(file, mode.create_directories); !ok) return std::unexpected(ok.error());
  if (auto ok = check_one_name(path); !ok) return std::unexpected(ok.error());
  auto pinned = files::pin_database_file(file, !mode.private_root.empty(), {"-wake", "-journal"});
  if (!pinned) return std::unexpected(pinned.error());
  auto db = open_handle(path, path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, dblock_vfs());
  if (!db) return std::unexpected(db.error());
  // SQLite opened the name again, after resolving any link on it: the file must be the one
  // checked, not one another user swapped in meanwhile (a plain file, then a link to elsewhere).
  const char* opened = sqlite3_db_filename(db->get(), "main");
  if (auto ok = files::check_opened(file, *pinned, opened ? opened : ""); !ok) return std::unexpected(ok.error());
  Connection conn(std::move(*db), path, busy_timeout);
  if (auto ok = conn.configure(); !ok) return std::unexpected(ok.error());
  return conn;
}

Result<Connection> Connection::open_read_only(const std::string& path, Millis busy_timeout, bool default_location) {
  const files::DatabaseFile file = database_file(path);
  if (auto ok = files::check_reachable(file); !ok) return std::unexpected(ok.error());
  if (::access(path.c_str(), F_OK) != 0) {
    const int err = errno;
    if (err != ENOENT)
      return fail(ErrorKind::connection, "cannot read the SQLite database " + path + ": " + std::strerror(err));
    // The default location may simply not exist yet; a written DSN with a missing directory
    // is a typo and says which directory.
    if (!default_location)
      if (auto dir = files::check_directory(file, false); !dir) return std::unexpected(dir.error());
    return no_lock_database(path);
  }
  if (auto ok = files::check_readable(file); !ok) return std::unexpected(ok.error());
  auto pinned = files::inspect_database_file(file, {"-wake", "-journal"}, false);
  if (!pinned) return std::unexpected(pinned.error());
  auto db = open_handle(path, path, SQLITE_OPEN_READONLY, dblock_vfs());
  if (!db) return std::unexpected(db.error());
  const char* opened = sqlite3_db_filename(db->get(), "main");
  if (auto ok = files::check_opened(file, *pinned, opened ? opened : ""); !ok) return std::unexpected(ok.error());
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
  auto immutable = open_handle(path, files::file_uri(path, "immutable=1"), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr);
  if (!immutable) return std::unexpected(immutable.error());
  Connection fallback(std::move(*immutable), path, busy_timeout);
  fallback.immutable_ = true;
  if (auto ok = fallback.configure_functions(); !ok) return std::unexpected(ok.error());
  return fallback;
}

int add_functions(sqlite3* db) {
  // DIRECTONLY: only dblock's own statements may read the clock (or depend on these functions),
  // never a trigger or view someone stored in the file.
  for (auto [name, fn] : {std::pair{"dblock_boot_ms", &sql_boot_ms}, std::pair{"dblock_boot_id", &sql_boot_id}}) {
    const int rc =
        sqlite3_create_function_v2(db, name, 0, SQLITE_UTF8 | SQLITE_DIRECTONLY, nullptr, fn, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return rc;
  }
  return sqlite3_create_function_v2(db, "dblock_epoch_ms", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY | SQLITE_DETERMINISTIC,
                                    nullptr, &sql_epoch_ms, nullptr, nullptr, nullptr);
}

Result<void> Connection::configure_functions() const {
  sqlite3_extended_result_codes(db_.get(), 1);
  if (int rc = add_functions(db_.get()); rc != SQLITE_OK)
    return std::unexpected(make_error(*this, rc, "registering the boot clock and time functions"));
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
    auto pages = read_one("PRAGMA page_count", "reading the size of the database");
    if (!pages) return std::unexpected(pages.error());
    if (*pages == "0")
      if (auto ok = exec("PRAGMA synchronous=OFF", "switching a new file to WAL"); !ok) return ok;
  }
  while (*mode != "wal") {
    auto switched = read_one("PRAGMA journal_mode=WAL", "switching to WAL journal mode");
    if (switched) {
      *mode = switched->value_or("");
      break;  // a file system without shared memory stays in its old mode; doctor reports it
    }
    if ((switched.error().native_code & 0xff) != SQLITE_BUSY || boottime_now() >= deadline)
      return std::unexpected(switched.error());
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
  const auto busy_ms = static_cast<std::intptr_t>(std::min<std::int64_t>(busy_timeout_.count(), INT_MAX));
  sqlite3_wal_hook(db_.get(), &checkpoint_hook, reinterpret_cast<void*>(busy_ms));
  return {};
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
  auto mode = read_one("PRAGMA journal_mode", "reading the journal mode");
  if (!mode) return std::unexpected(mode.error());
  return mode->value_or("");
}

Result<StmtHandle> Connection::prepare(std::string_view sql) const {
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v2(db_.get(), sql.data(), static_cast<int>(sql.size()), &raw, nullptr);
  StmtHandle stmt(raw);
  if (rc != SQLITE_OK) return std::unexpected(make_error(*this, rc, "preparing a statement"));
  return stmt;
}

Result<bool> Connection::step(sqlite3_stmt* stmt, std::string_view doing) const {
  const int rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW || rc == SQLITE_DONE) return rc == SQLITE_ROW;
  return std::unexpected(make_error(*this, rc, doing));
}

Result<std::optional<std::string>> Connection::read_one(std::string_view sql, std::string_view doing) const {
  auto stmt = prepare(sql);
  if (!stmt) return std::unexpected(stmt.error());
  auto row = step(stmt->get(), doing);
  if (!row) return std::unexpected(row.error());
  if (!*row) return std::nullopt;
  return column_text(stmt->get(), 0);
}

Result<void> Connection::exec(const std::string& sql, std::string_view doing) const {
  int rc = sqlite3_exec(db_.get(), sql.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return std::unexpected(make_error(*this, rc, doing));
  return {};
}

Result<sql::Rows> Session::run(const sql::Statement& st, const sql::Params& params) {
  // An acquisition must never commit at NORMAL, even after a resync that failed.
  if (auto ok = resync(); !ok) return std::unexpected(ok.error());
  // SQLite reads `:name` itself (as sql::compile does, quotes included), so the text is
  // prepared as written and each parameter bound by the name SQLite found: no compiled copy
  // of the text (a run prepares each statement once; docs/performance.md).
  auto prepared = conn_->prepare(st.text);
  if (!prepared) return std::unexpected(prepared.error());
  sqlite3_stmt* stmt = prepared->get();
  for (int index = 1, count = sqlite3_bind_parameter_count(stmt); index <= count; ++index) {
    const char* name = sqlite3_bind_parameter_name(stmt, index);  // ":key"
    const sql::Value* v = name && name[0] == ':' ? params.find(name + 1) : nullptr;
    if (!v)
      return fail(ErrorKind::internal,
                  "statement " + std::string(st.id) + ": no value for " + (name ? std::string(name) : "?"));
    if (const auto* n = std::get_if<std::int64_t>(v)) sqlite3_bind_int64(stmt, index, *n);
    else if (const auto* text = std::get_if<std::string>(v))
      sqlite3_bind_text(stmt, index, text->data(), static_cast<int>(text->size()), SQLITE_TRANSIENT);
    else sqlite3_bind_null(stmt, index);
  }
  sql::Rows rows;
  for (;;) {
    auto row = conn_->step(stmt, st.id);
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    std::vector<sql::Rows::Cell> cells;
    for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
      if (sqlite3_column_type(stmt, c) == SQLITE_NULL) cells.emplace_back();
      else cells.emplace_back(column_text(stmt, c));
    }
    rows.add(std::move(cells));
  }
  // sqlite3_changes() keeps the count of the last INSERT, UPDATE or DELETE: a SELECT counts its rows.
  const bool writes = !sqlite3_stmt_readonly(stmt);
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

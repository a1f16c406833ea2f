#pragma once
// RAII around the SQLite C API, shared by the files of this directory only: every handle is
// owned by a unique_ptr with its deleter, every value is bound, every failure is an Error.

#include <sqlite3.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "backends/sqlite/sqlite_file.hpp"
#include "backends/sqlite/sqlite_wake.hpp"
#include "core/error.hpp"
#include "core/lock_types.hpp"
#include "core/sql/sql_session.hpp"

namespace dblock::sqlite {

struct DbCloser {
  void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
};
struct StmtFinalizer {
  void operator()(sqlite3_stmt* stmt) const noexcept { sqlite3_finalize(stmt); }
};
using DbHandle = std::unique_ptr<sqlite3, DbCloser>;
using StmtHandle = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

/// Registers dblock's SQL functions on `db` (every connection has them): dblock_boot_ms(),
/// dblock_boot_id() and dblock_epoch_ms(julianday). An SQLite result code.
int add_functions(sqlite3* db);
/// SQL text that turns a stored `YYYY-MM-DD HH:MM:SS.SSS` timestamp expression into epoch ms
/// (exact: SQLite's own milliseconds, through julianday and dblock_epoch_ms); NULL stays NULL.
std::string epoch_ms_sql(std::string_view expr);
/// Whole milliseconds from the time `from` to the time `to` (SQL).
std::string ms_between_sql(std::string_view from, std::string_view to);
/// SQL text for database now as a stored timestamp, optionally plus a bound millisecond offset.
std::string now_sql();
std::string now_plus_sql(std::string_view ms_param);

class Connection;

/// Maps an SQLite result code into ErrorKind with a message naming the database file and
/// what was being done (sqlite_error.cpp, the one home of this mapping).
Error make_error(const Connection& conn, int rc, std::string_view doing);
/// ErrorKind for an SQLite (extended) result code.
ErrorKind error_kind(int rc);

/// How a connection opens its file (BackendOptions::inspect, create_directories).
struct OpenMode {
  bool read_only = false;           // SQLITE_OPEN_READONLY; creates nothing, writes no pragma
  bool create_directories = false;  // the default location: mkdir -p the parent (read-only: a missing one is no database)
  std::string private_root;         // BackendOptions::private_root: check the path up to it is private
};

/// One open database file in WAL mode with a busy timeout.
class Connection {
 public:
  /// Read-write: creates the file if missing, after the checks of sqlite_file.hpp
  /// (owners, permissions, the directory: made only with mode.create_directories). Read-only:
  /// a missing file is no_lock_database (common/dsn.hpp).
  static Result<Connection> open(const std::string& path, Millis busy_timeout, OpenMode mode = {});

  Result<StmtHandle> prepare(std::string_view sql) const;
  /// Steps `stmt` once: true when a row is ready, false when done. `doing` names the operation.
  Result<bool> step(sqlite3_stmt* stmt, std::string_view doing) const;
  /// The first column of the first row of a statement without parameters (a pragma), as text;
  /// nullopt without a row.
  Result<std::optional<std::string>> read_one(std::string_view sql, std::string_view doing) const;
  /// Runs SQL text without parameters (DDL, BEGIN, pragmas).
  Result<void> exec(const std::string& sql, std::string_view doing) const;

  sqlite3* get() const { return db_.get(); }
  const std::string& path() const { return path_; }
  Millis busy_timeout() const { return busy_timeout_; }
  /// The journal mode the database reports ("wal" when all is well).
  Result<std::string> journal_mode() const;

 private:
  Connection(DbHandle db, std::string path, Millis busy_timeout)
      : db_(std::move(db)), path_(std::move(path)), busy_timeout_(busy_timeout) {}
  Result<void> configure() const;
  Result<void> configure_functions() const;
  static Result<Connection> open_read_only(const std::string& path, Millis busy_timeout, bool default_location);

  DbHandle db_;
  std::string path_;
  bool immutable_ = false;  // the read-only fallback without -shm: SQLite reports no WAL there
  Millis busy_timeout_;
};

/// Opens a write transaction whose commit does not wait for the disk: synchronous=NORMAL, under
/// which a WAL commit appends its frames without an fsync. The next commit at FULL fsyncs the
/// WAL, and with it these frames; a checkpoint syncs them first too. Session::exec sets FULL
/// again once the transaction has ended, so nothing after it is weakened.
inline constexpr std::string_view begin_unsynced = "PRAGMA synchronous=NORMAL; BEGIN IMMEDIATE";

/// The connection as the strategies of core/sql see it (sql_session.hpp).
class Session final : public sql::Session {
 public:
  explicit Session(std::shared_ptr<const Connection> conn)
      : conn_(std::move(conn)), waiters_(std::make_unique<files::WakeWords>(conn_->path())) {}
  Result<sql::Rows> run(const sql::Statement& st, const sql::Params& params) override;
  Result<void> exec(std::string_view sql) override;
  /// A file has no connection to lose.
  Result<void> reconnect(const Error& why) override { return std::unexpected(why); }
  /// SQLite reports a missing table or column as plain SQLITE_ERROR, the code of many mistakes.
  std::string where() const override { return conn_->path(); }
  sql::Waiters& release_signal() override { return waiters_; }

 private:
  /// After a begin_unsynced transaction has ended: synchronous=FULL again.
  Result<void> resync();

  std::shared_ptr<const Connection> conn_;
  sql::Waiters waiters_;   // over <db>-wake: a release wakes one waiter of its key
  bool unsynced_ = false;  // begin_unsynced ran and FULL is not back yet
};

/// An identifier in double quotes with embedded quotes doubled.
std::string quote_ident(std::string_view name);

}  // namespace dblock::sqlite

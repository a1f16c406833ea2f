#pragma once
// RAII around the SQLite C API, shared by the files of this directory only: every handle is
// owned by a unique_ptr with its deleter, every value is bound, every failure is an Error.

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "backends/common/sql_session.hpp"
#include "core/error.hpp"
#include "core/lock_types.hpp"

namespace dblock::sqlite {

struct DbCloser {
  void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
};
struct StmtFinalizer {
  void operator()(sqlite3_stmt* stmt) const noexcept { sqlite3_finalize(stmt); }
};
using DbHandle = std::unique_ptr<sqlite3, DbCloser>;
using StmtHandle = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

/// SQL text that turns a stored `YYYY-MM-DD HH:MM:SS.SSS` timestamp expression into epoch ms
/// (exact: whole seconds from %s, milliseconds from %f); NULL stays NULL.
std::string epoch_ms_sql(std::string_view expr);
/// SQL text for database now as a stored timestamp, optionally plus a bound millisecond offset.
std::string now_sql();
std::string now_plus_sql(std::string_view ms_param);

class Connection;

/// Maps an SQLite result code into ErrorKind with a message naming the database file and
/// what was being done (sqlite_error.cpp, the one home of this mapping).
Error make_error(const Connection& conn, int rc, std::string_view doing);
/// ErrorKind for an SQLite (extended) result code.
ErrorKind error_kind(int rc);

/// A prepared statement; parameters are 1-based, columns 0-based as in SQLite.
class Statement {
 public:
  Statement(const Connection& conn, StmtHandle stmt) : conn_(&conn), stmt_(std::move(stmt)) {}

  void bind(int index, std::string_view text);
  void bind(int index, std::int64_t value);
  void bind_null(int index);
  void bind(int index, const std::optional<std::int64_t>& value);
  void bind(int index, const std::optional<std::string>& value);

  /// true: a row is ready; false: done. `doing` names the operation for the error message.
  Result<bool> step(std::string_view doing);
  /// Steps once and returns SQLite's result code, for callers that retry on their own.
  int step_code() { return sqlite3_step(stmt_.get()); }
  /// Steps to completion, ignoring rows.
  Result<void> run(std::string_view doing);
  /// Makes the statement ready to be bound and stepped again.
  void reset();

  bool is_null(int column) const;
  std::int64_t int64(int column) const;
  std::optional<std::int64_t> opt_int64(int column) const;
  std::string text(int column) const;
  int column_count() const { return sqlite3_column_count(stmt_.get()); }
  sqlite3_stmt* handle() const { return stmt_.get(); }

 private:
  const Connection* conn_;
  StmtHandle stmt_;
};

/// How a connection opens its file (BackendOptions::inspect, create_directories).
struct OpenMode {
  bool read_only = false;           // SQLITE_OPEN_READONLY; creates nothing, writes no pragma
  bool create_directories = false;  // the default location: mkdir -p the parent (read-only: a missing one is no database)
  std::string private_root;         // BackendOptions::private_root: check the path up to it is private
};

/// One open database file in WAL mode with a busy timeout.
class Connection {
 public:
  /// Read-write: creates the file if missing (mode 0666 less the umask; 0644 less it at the
  /// default location, mode.private_root), and the parent directory (0755) only with
  /// mode.create_directories (else a missing one is ErrorKind::config naming it). Permission
  /// denied on the way (a directory this user may not enter; the file, -wal or -shm it may not
  /// write, or read when read-only; the directory it may not write to create one) is
  /// ErrorKind::config naming the user, the part with its mode, owner and group, and the fix;
  /// another OS reason is ErrorKind::connection. Read-only: a missing file is no_lock_database
  /// (common/dsn.hpp).
  static Result<Connection> open(const std::string& path, Millis busy_timeout, OpenMode mode = {});

  Result<Statement> prepare(std::string_view sql) const;
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

/// BEGIN IMMEDIATE ... COMMIT; the destructor rolls back an uncommitted transaction and
/// never throws.
class Transaction {
 public:
  static Result<Transaction> begin_immediate(const Connection& conn, std::string_view doing);
  Transaction(Transaction&& other) noexcept : conn_(other.conn_) { other.conn_ = nullptr; }
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  ~Transaction();

  Result<void> commit(std::string_view doing);

 private:
  explicit Transaction(const Connection& conn) : conn_(&conn) {}
  const Connection* conn_;
};

/// Wakes a waiter without polling: every commit appends to the database's write-ahead log
/// (<db>-wal, kept between runs), so a change to that file means a release may have happened.
/// Other keys' commits wake it too; each costs one attempt. Without the file (or inotify) the
/// waiter falls back to core's backoff. Created on first use: only a run that waits pays for it.
class WalWatch final : public sql::ReleaseSignal {
 public:
  explicit WalWatch(std::string wal_path) : wal_path_(std::move(wal_path)) {}
  WalWatch(const WalWatch&) = delete;
  WalWatch& operator=(const WalWatch&) = delete;
  ~WalWatch() override;
  int fd() const override;
  void consume() override;

 private:
  std::string wal_path_;
  mutable int fd_ = -1;
  mutable bool failed_ = false;
};

/// Opens a write transaction whose commit does not wait for the disk: synchronous=NORMAL, under
/// which a WAL commit appends its frames without an fsync. The next commit at FULL fsyncs the
/// WAL, and with it these frames; a checkpoint syncs them first too. Session::exec sets FULL
/// again once the transaction has ended, so nothing after it is weakened.
inline constexpr std::string_view begin_unsynced = "PRAGMA synchronous=NORMAL; BEGIN IMMEDIATE";

/// The connection as the strategies of src/backends/common see it (sql_session.hpp).
class Session final : public sql::Session {
 public:
  explicit Session(std::shared_ptr<const Connection> conn) : conn_(std::move(conn)), wal_watch_(conn_->path() + "-wal") {}
  Result<sql::Rows> run(const sql::Statement& st, const sql::Params& params) override;
  Result<void> exec(std::string_view sql) override;
  /// A file has no connection to lose.
  Result<void> reconnect(const Error& why) override { return std::unexpected(why); }
  /// SQLite reports a missing table or column as plain SQLITE_ERROR, the code of many mistakes.
  bool schema_missing(const Error& failed) const override { return (failed.native_code & 0xff) == SQLITE_ERROR; }
  std::string where() const override { return conn_->path(); }
  sql::ReleaseSignal& release_signal() override { return wal_watch_; }

 private:
  /// After a begin_unsynced transaction has ended: synchronous=FULL again.
  Result<void> resync();

  std::shared_ptr<const Connection> conn_;
  sql::CompiledCache compiled_{sql::PlaceholderStyle::numbered};
  WalWatch wal_watch_;
  bool unsynced_ = false;  // begin_unsynced ran and FULL is not back yet
};

/// An identifier in double quotes with embedded quotes doubled.
std::string quote_ident(std::string_view name);

}  // namespace dblock::sqlite

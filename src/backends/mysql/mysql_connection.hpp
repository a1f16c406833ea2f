#pragma once
// One MySQL/MariaDB connection: the named statements of sql_session.hpp as prepared statements,
// cached per connection, so a repeated statement costs one round trip.

#include <mysql.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "backends/mysql/mysql_dsn.hpp"
#include "backends/mysql/mysql_error.hpp"
#include "core/backend.hpp"
#include "core/sql/sql_session.hpp"

namespace dblock::mysql {

class Connection {
 public:
  /// Connects with every time bound set, utf8mb4, no automatic reconnect, a close-on-exec
  /// socket, and options.session_idle_limit for a lock holder (a year for the others, once
  /// keep_idle asks for it or the connection is made again); UTC with --table-format shedlock.
  /// `settings`: a lock holder's more session assignments (", SESSION x = 1"). `idle_now`: a
  /// bookkeeping session's idle limits set with the connection, as keep_idle would later.
  static Result<std::unique_ptr<Connection>> open(const Dsn& dsn, const BackendOptions& options,
                                                  ConnectionRole role = ConnectionRole::bookkeeping,
                                                  std::string_view settings = {}, bool idle_now = false);

  /// Runs `st` with `params` bound by name (sql::Session::run), and :wake, :queue and
  /// :wake_given_back, where it names them, as `key`'s wake and queue names (mysql_names.hpp). `affected`: a SELECT's rows,
  /// else the server's count.
  Result<sql::Rows> run(const sql::Statement& st, const sql::Params& params = {});
  /// run() of `st` behind `ahead` in one block (BEGIN NOT ATOMIC, MariaDB), one round trip:
  /// `params` bind both; `ahead`'s rows in `ahead_rows`, read even when `st` then failed
  /// (sql::Session::run_behind, a row lock's HolderSession::send_behind). What put_ahead_of_next
  /// left goes between the two.
  Result<sql::Rows> run_behind(const sql::Statement& ahead, const sql::Statement& st, const sql::Params& params,
                               sql::Rows& ahead_rows);
  /// `ahead` (statements without an answer: a setting, an INSERT) goes ahead of the next
  /// statement run, in its block and round trip (MariaDB); empty: nothing does. A statement that
  /// is a block itself runs in it as a block of its own.
  void put_ahead_of_next(const sql::Statement& ahead) { ahead_ = ahead; }
  /// `after` (a statement whose answer, if any, is dropped) goes after the next statement run, in
  /// its block and round trip (MariaDB), and runs only when that statement did not fail; empty:
  /// nothing does.
  void put_after_next(const sql::Statement& after) { after_ = after; }
  /// Runs a statement without parameters through the text protocol; any rows are discarded.
  Result<void> query(std::string_view sql);
  /// Sends `sql` and ends the session at once, without waiting for the answer: the server runs
  /// it all the same before it sees the session end (it reads in order). A later statement
  /// opens a new session first.
  Result<void> query_last(std::string_view sql);

  /// Drops the connection and opens a new one with the same settings.
  Result<void> reconnect();
  /// Drops the connection (the server frees what its session held); reconnect opens it again.
  void close() {
    mysql_.reset();  // before its statements (statements_)
    statements_.clear();
    ended_by_last_ = false;
  }
  /// Sets the session's idle limits, unless set already: before it sits idle while a job runs.
  Result<void> keep_idle();
  /// The key whose wake name the last statement run gave back (it binds :wake_given_back, the
  /// wake name, as MariaDB's lease release does), or "".
  const std::string& gave_back_wake() const { return gave_back_wake_; }
  /// query_last ended the session (and no statement opened a new one since).
  bool ended_by_last() const { return !mysql_ && ended_by_last_; }

  /// The connection's socket, or -1 when closed.
  int socket() const { return mysql_ ? static_cast<int>(mysql_get_socket(mysql_.get())) : -1; }
  /// Whether a transaction is open, as the server's last reply said.
  bool in_transaction() const {
    return mysql_ && (mysql_->server_status & SERVER_STATUS_IN_TRANS) != 0;
  }
  /// The session's DATABASE(), as the handshake left it: the one the key's lock names hash.
  const std::string& database() const { return database_; }
  /// The server's id for this session (CONNECTION_ID()).
  std::uint64_t session_id() const { return mysql_ ? mysql_thread_id(mysql_.get()) : 0; }
  /// The server's handshake says MariaDB.
  bool mariadb() const {
    return mysql_ && std::string_view(mysql_get_server_info(mysql_.get())).find("MariaDB") != std::string_view::npos;
  }
  /// The longest a statement may block (GET_LOCK, lock waits), in ms: below the read timeout,
  /// so a wait is never mistaken for a dead server.
  std::int64_t max_block_ms() const { return max_block_ms_; }
  /// How long the last handshake took (the TCP connect, the greeting, the authentication: two
  /// round trips and more), 0 before one.
  std::chrono::microseconds handshake() const { return handshake_; }
  /// The redacted DSN, for messages.
  const std::string& where() const { return dsn_.redacted; }
  /// TLS and peer of the open connection (doctor); nullopt when closed.
  std::optional<sql::Transport> transport() const;

 private:
  struct Close {
    void operator()(MYSQL* m) const { mysql_close(m); }
    void operator()(MYSQL_STMT* s) const { mysql_stmt_close(s); }
    void operator()(MYSQL_RES* r) const { mysql_free_result(r); }
  };
  Connection(Dsn dsn, MysqlDsn target, BackendOptions options, std::string init_command)
      : dsn_(std::move(dsn)), target_(std::move(target)), options_(std::move(options)),
        init_command_(std::move(init_command)) {}
  Error error_from_mysql() const;  // the connection's errno and SQLSTATE
  Error error_from_stmt(MYSQL_STMT* stmt) const;
  Result<MYSQL_STMT*> prepared(const std::string& sql, std::vector<MYSQL_BIND>& binds, bool& executed);
  /// `e`; a lost connection's prepared statements are gone with it.
  std::unexpected<Error> failed(Error e);
  /// Before a statement: a new session after query_last's end.
  Result<void> settle();
  /// `params`, and :wake and :queue of its :key when `compiled` names them (named_).
  const sql::Params& with_names(const sql::Compiled& compiled, const sql::Params& params);
  /// run(), the first answer of a block in `first` where given (run_behind).
  Result<sql::Rows> execute(const sql::Statement& st, const sql::Params& params, sql::Rows* first);
  /// The rows of `stmt`'s answer now, described by `meta`, added to `out`; false: its error.
  static bool fetch_rows(MYSQL_STMT* stmt, MYSQL_RES* meta, sql::Rows& out);

  Dsn dsn_;
  MysqlDsn target_;
  BackendOptions options_;
  std::string init_command_;  // the next connection's (empty: none)
  std::string every_init_;    // every setting, for a connection made again
  std::string idle_command_;  // the idle limits alone (keep_idle)
  std::string deferred_;      // settings that go ahead of the next statement (MariaDB: reconnect)
  sql::Statement ahead_;      // put_ahead_of_next's, for the next statement
  sql::Statement after_;      // put_after_next's, for the next statement
  bool idle_set_ = false;
  bool ended_by_last_ = false;  // query_last ended the session
  // Declared first, so destroyed after the connection: mysql_close() detaches them, and closing
  // them afterwards frees memory without sending the server a COM_STMT_CLOSE for each, which
  // the session's end does anyway.
  std::unordered_map<std::string, std::unique_ptr<MYSQL_STMT, Close>> statements_;
  std::unique_ptr<MYSQL, Close> mysql_;
  std::int64_t max_block_ms_ = 0;
  std::chrono::microseconds handshake_{0};  // handshake()
  std::string database_;  // the session's DATABASE(), as the handshake left it
  // The last key's wake and queue names (with_names), and the parameters they were added to.
  std::string named_key_, named_database_, wake_, queue_;
  std::string gave_back_wake_;  // gave_back_wake()
  sql::Params named_;
  sql::CompiledCache compiled_{sql::PlaceholderStyle::question};
};

class NamedLockWake;

/// The connection as the strategies of core/sql see it (sql_session.hpp), its waiters woken
/// through named locks (NamedLockWake).
class Session final : public sql::Session {
 public:
  Session(std::unique_ptr<Connection> conn, std::string prefix);
  /// Connection::run: every statement alike (what a take did for the wake, core tells the wake).
  Result<sql::Rows> run(const sql::Statement& st, const sql::Params& params) override { return conn_->run(st, params); }
  /// In one block on MariaDB (Connection::run_behind), the parameters of both bound together;
  /// on MySQL, which runs no block as a prepared statement, one after the other.
  Result<sql::Rows> run_behind(const sql::Statement& ahead, const sql::Params& ahead_params, const sql::Statement& st,
                               const sql::Params& params, Millis bound, sql::AheadAnswer& answer) override;
  Result<void> exec(std::string_view sql) override { return conn_->query(sql); }
  Result<void> exec_last(std::string_view sql) override { return conn_->query_last(sql); }
  Result<void> reconnect(const Error&) override { return conn_->reconnect(); }
  std::string where() const override { return conn_->where(); }
  std::optional<sql::Transport> transport() const override { return conn_->transport(); }
  sql::Waiters& release_signal() override { return waiters_; }
  std::int64_t started_id() const override { return static_cast<std::int64_t>(conn_->session_id()); }
  /// Connection::keep_idle.
  Result<void> keep_idle() { return conn_->keep_idle(); }
  /// The connection itself: advisory's holder session shares it (mysql_session_lock.cpp).
  Connection& connection() { return *conn_; }
  /// The holder's session took `key`'s wake name with the lock and gives it back as it ends:
  /// this session neither takes nor gives it back for `key`.
  void wake_held_by_holder(const std::string& key);

 private:
  std::unique_ptr<Connection> conn_;
  NamedLockWake* wake_;  // waiters_'s
  sql::Waiters waiters_;
};

}  // namespace dblock::mysql

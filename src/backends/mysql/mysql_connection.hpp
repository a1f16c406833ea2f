#pragma once
// One MySQL/MariaDB connection: RAII handles, options from the DSN, time bounds, and
// prepared statements with bound parameters (cached per connection, so a repeated statement
// costs one round trip).

#include <mysql.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backends/backend.hpp"
#include "backends/common/sql_session.hpp"
#include "backends/mysql/mysql_dsn.hpp"
#include "backends/mysql/mysql_statement.hpp"

namespace dblock::mysql {

/// One column value as the server sent it (text form), or nullopt for SQL NULL.
using Value = std::optional<std::string>;
using Row = std::vector<Value>;

struct Outcome {
  std::uint64_t affected_rows = 0;
  std::uint64_t insert_id = 0;  // also the value of LAST_INSERT_ID(expr)
  std::vector<Row> rows;
  bool has_result = false;  // the statement returns rows (a SELECT), however many
};

struct MysqlCloser {
  void operator()(MYSQL* m) const { mysql_close(m); }
};
struct StmtCloser {
  void operator()(MYSQL_STMT* s) const { mysql_stmt_close(s); }
};
struct ResultFreer {
  void operator()(MYSQL_RES* r) const { mysql_free_result(r); }
};
using MysqlPtr = std::unique_ptr<MYSQL, MysqlCloser>;
using StmtPtr = std::unique_ptr<MYSQL_STMT, StmtCloser>;
using ResultPtr = std::unique_ptr<MYSQL_RES, ResultFreer>;

class Connection {
 public:
  /// Connects with every time bound set, utf8mb4, UTC session time zone, no automatic
  /// reconnect, close-on-exec socket, and the session's idle limit: options.session_idle_limit
  /// for a lock holder, none (a year) for the others.
  /// `settings`: more session assignments for the init command (", SESSION x = 1"), so they
  /// travel with the connection instead of costing a SET of their own.
  static Result<std::unique_ptr<Connection>> open(const Dsn& dsn, const BackendOptions& options,
                                                  ConnectionRole role = ConnectionRole::bookkeeping,
                                                  std::string_view settings = {});

  /// Runs one statement with its bound values; rows come back as text. A statement whose
  /// placeholders and values disagree is ErrorKind::internal and never reaches the server.
  /// Prepared statements are cached per connection, keyed by the SQL text.
  Result<Outcome> execute(const Sql& statement);
  /// Fixed SQL text with all its values in one call.
  Result<Outcome> execute(std::string_view sql, std::initializer_list<Param> params = {}) {
    Sql statement;
    statement.add(sql, params);
    return execute(statement);
  }
  /// Runs a statement without parameters through the text protocol (SET, START TRANSACTION,
  /// DDL, ROLLBACK); any rows are read and discarded.
  Result<void> query(std::string_view sql);

  /// Drops the connection and opens a new one with the same settings.
  Result<void> reconnect();

  /// The connection's socket, or -1 when closed.
  int socket() const { return mysql_ ? static_cast<int>(mysql_get_socket(mysql_.get())) : -1; }
  /// The server's id for this session (CONNECTION_ID()).
  std::uint64_t session_id() const { return session_id_; }
  /// "10.11.19-MariaDB..." as the server reports it.
  std::string server_info() const;
  /// The longest a single statement may block before the read timeout fires, in ms; blocking
  /// waits (GET_LOCK, lock waits) are capped below it so a wait is never mistaken for a dead server.
  std::int64_t max_block_ms() const { return max_block_ms_; }
  /// The redacted DSN, for messages.
  const std::string& where() const { return dsn_.redacted; }

 private:
  Connection(Dsn dsn, MysqlDsn target, BackendOptions options, std::string init_command)
      : dsn_(std::move(dsn)), target_(std::move(target)), options_(std::move(options)),
        init_command_(std::move(init_command)) {}
  Result<void> connect();
  Error error_from_mysql() const;  // the connection's errno and SQLSTATE
  Error error_from_stmt(MYSQL_STMT* stmt) const;
  Result<MYSQL_STMT*> prepared(const std::string& sql, std::size_t param_count, MYSQL_BIND* binds, bool& executed);

  Dsn dsn_;
  MysqlDsn target_;
  BackendOptions options_;
  std::string init_command_;
  MysqlPtr mysql_;
  std::unordered_map<std::string, StmtPtr> statements_;
  std::uint64_t session_id_ = 0;
  std::int64_t max_block_ms_ = 0;
};

/// Wakes a waiter from the server instead of core's backoff (lease, for-update, txn-insert): the
/// holder keeps a GET_LOCK on the key's wake name on this session while it holds the key, and a
/// waiter blocks on it until the release; only the waiter at the head of the key's queue name
/// does, so a release wakes one waiter, not all of them (mysql_tables.hpp, wake_name and
/// queue_name). A holder that died gave the names back with its session; a lease's own expiry
/// still decides who may take the key.
class WakeQueue final : public sql::ReleaseSignal {
 public:
  WakeQueue(Connection& conn, std::string prefix) : conn_(&conn), prefix_(std::move(prefix)) {}
  void holding(const std::string& key) override;
  void released(const std::string& key) override;
  Result<bool> busy(const std::string& key, Millis left) override;
  void stop_waiting(const std::string& key) override;

 private:
  Connection* conn_;
  std::string prefix_;
};

/// The connection as the strategies of src/backends/common see it (sql_session.hpp).
class Session final : public sql::Session {
 public:
  /// `shedlock_table` (--table-format shedlock, unquoted, as options give it): a missing table
  /// is repaired by making dblock's tables and that one (when missing; its shape checked).
  Session(std::unique_ptr<Connection> conn, std::string prefix, std::string shedlock_table = {})
      : conn_(std::move(conn)),
        prefix_(std::move(prefix)),
        shedlock_table_(std::move(shedlock_table)),
        wake_queue_(*conn_, prefix_) {}
  /// The connection, for the Backend's own statements (release, doctor).
  Connection* connection() { return conn_.get(); }
  Result<sql::Rows> run(const sql::Statement& st, const sql::Params& params) override;
  Result<void> exec(std::string_view sql) override { return conn_->query(sql); }
  Result<void> reconnect(const Error&) override { return conn_->reconnect(); }
  Result<bool> repair_schema(const Error& failed) override;
  sql::ReleaseSignal& release_signal() override { return wake_queue_; }

 private:
  std::unique_ptr<Connection> conn_;
  std::string prefix_;
  std::string shedlock_table_;
  sql::CompiledCache compiled_{sql::PlaceholderStyle::question};
  WakeQueue wake_queue_;
};

}  // namespace dblock::mysql

#pragma once
// One libpq connection with every statement time-bounded: the asynchronous API plus poll()
// on PQsocket against a CLOCK_BOOTTIME deadline, so an unreachable server cannot hang dblock.

#include <libpq-fe.h>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backends/backend.hpp"
#include "backends/common/dsn.hpp"
#include "backends/common/sql_session.hpp"

namespace dblock::postgres {

struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ConnPtr = std::unique_ptr<PGconn, ConnDeleter>;

/// A bound parameter in text format; nullopt is SQL NULL.
using Param = std::optional<std::string>;
using Params = std::vector<Param>;

/// One statement of a pipeline.
struct Statement {
  std::string sql;
  Params params;
  /// Only planned, not run (EXPLAIN, with `params` as sample values), and once per session:
  /// the text is remembered. A fresh session's first parse and plan of a statement cost about
  /// a millisecond or two of catalog and statistics lookups; done ahead of a statement that may
  /// wait for a lock, that cost is off the handoff, and the real run later plans against warm
  /// caches. Nothing named stays on the server. A prepared statement's warm-up prepares and
  /// plans it instead (below).
  bool warm_up = false;
  /// Ends the implicit transaction after this statement (a Sync of its own): what it locked
  /// is let go, and a failure does not stop the statements after it.
  bool sync_after = false;
  /// Kept as a named prepared statement of this session, with a generic plan, and from then on
  /// run by name, neither parsed nor planned again. Its warm-up prepares and plans it; without
  /// one, its first run prepares it (same round trip).
  /// Only on a connection to the server itself; behind a pooler it runs unnamed, as if not
  /// prepared. A pooler in transaction mode could run a later transaction in a server session
  /// without the name (26000), or rename it (PgBouncer 1.21+), and a pooler that keeps server
  /// sessions for the next client leaves names behind (42P05); each is an error in the server's
  /// log. The connection tells from the process id it was given (names_kept), checks it against
  /// the server's with its first names, and stops naming when a pooler shows anyway: a run by
  /// name refused with 26000 outside an explicit transaction runs again, unnamed. So in such a
  /// pipeline only warm-ups may come before that statement.
  bool prepared = false;
};

/// Owns a PGresult; typed accessors for the text-format values.
class QueryResult {
 public:
  QueryResult() = default;
  explicit QueryResult(PGresult* r) : r_(r, ResultDeleter{}) {}
  int rows() const { return r_ ? PQntuples(r_.get()) : 0; }
  bool is_null(int row, int col) const { return PQgetisnull(r_.get(), row, col) != 0; }
  std::string text(int row, int col) const;
  std::int64_t int64(int row, int col) const;
  std::optional<std::int64_t> opt_int64(int row, int col) const;
  bool boolean(int row, int col) const;  // 't'
  /// Rows changed by INSERT/UPDATE/DELETE.
  long affected() const;
  explicit operator bool() const { return r_ != nullptr; }
  const PGresult* get() const { return r_.get(); }

 private:
  std::shared_ptr<PGresult> r_{nullptr, ResultDeleter{}};
};

/// Not thread-safe, and needs not be: the lease locker shares the backend's connection, but
/// core renews only between try_acquire and release and never alongside them, and nothing
/// else uses the backend during a run (src/core/locker.hpp, threading contract).
class Connection {
 public:
  /// Connects (bounded by options.connect_timeout); ErrorKind::config for a bad DSN, bad
  /// credentials or an unknown database, ErrorKind::connection when the server is unreachable.
  /// A lock holder's session gets options.session_idle_limit; the others no idle limit.
  static Result<std::unique_ptr<Connection>> open(const Dsn& dsn, const BackendOptions& options,
                                              ConnectionRole role = ConnectionRole::bookkeeping);
  /// The same, connected only when its first statement runs (a backend whose connection a
  /// locker took over); it connects again on use after a failure.
  static std::unique_ptr<Connection> deferred(const Dsn& dsn, const BackendOptions& options,
                                              ConnectionRole role = ConnectionRole::bookkeeping);
  ~Connection();

  /// Runs sql (several statements allowed when params is empty) within io_timeout + extra.
  /// On timeout the query is cancelled and the connection closed (ErrorKind::connection).
  Result<QueryResult> exec(std::string_view sql, const Params& params = {}, Millis extra = Millis{0});

  /// Sends every statement at once and reads every answer: one round trip (libpq pipeline
  /// mode). They share one implicit transaction unless one of them opens an explicit one. The
  /// first failure is the error, and the statements after it did not run.
  Result<std::vector<QueryResult>> pipeline(std::span<const Statement> statements, Millis extra = Millis{0});

  /// True while a transaction is open and healthy on this connection.
  bool in_transaction() const;
  /// True while a transaction is open, healthy or failed (a ROLLBACK is due).
  bool transaction_open() const;
  /// True while the connection is usable.
  bool is_open() const;
  /// Closes and opens again (lease only; session strategies never reconnect), re-LISTENing.
  Result<void> reconnect();
  /// Closes the connection: any session lock it held is gone.
  void close();

  /// LISTENs on channel, and only on it, now and after every reconnect.
  Result<void> listen(const std::string& channel);
  /// Whether this connection LISTENs on channel.
  bool listening(const std::string& channel) const { return !channel_.empty() && channel_ == channel; }
  /// Stops listening. From then on every statement drops the notifications it reads, so
  /// none pile up in libpq while nobody calls drain_notifications().
  Result<void> unlisten();
  /// The socket to poll for notifications, or -1.
  int socket() const;
  /// Reads what arrived and drops the notifications; true if there was at least one.
  bool drain_notifications();

  /// The server process serving this connection (pg_backend_pid()).
  int backend_pid() const;
  const std::string& where() const { return dsn_.redacted; }

 private:
  Connection(Dsn dsn, BackendOptions options, ConnectionRole role)
      : dsn_(std::move(dsn)), options_(std::move(options)), role_(role) {}
  Result<void> connect();
  Result<void> connect_if_deferred();
  Result<std::vector<QueryResult>> pipeline(std::span<const Statement> statements, Millis extra, bool may_run_again);
  Result<void> start_connection(const std::vector<const char*>& keys, const std::vector<const char*>& values);
  Error broken(std::string_view doing);
  Error broken_and_closed(std::string_view doing);
  Result<void> flush(Millis deadline);
  Result<PGresult*> next_result(Millis deadline);
  void drop_stale_notifications();
  Error timed_out();
  /// Whether this session has planned sql as a warm-up; prepared it, for a prepared one.
  bool warmed(const std::string& sql) const;
  bool is_prepared(const std::string& sql) const;

  Dsn dsn_;
  BackendOptions options_;
  ConnectionRole role_;
  ConnPtr conn_;
  std::string channel_;  // empty: not listening
  bool deferred_ = false;
  std::vector<std::string> warmed_;    // warm-up statements planned in this session
  std::vector<std::string> prepared_;  // statements prepared in this session (name: prepared_name)
  // Whether prepared statements are named: false for good (reconnects included) once a pooler
  // showed that a later transaction may not find them (Statement::prepared).
  bool named_ = true;
  bool server_checked_ = false;  // pg_backend_pid() was compared with the connection's process id
  /// Whether prepared statements are named on this connection: not behind a pooler.
  bool names_kept() const;
};

/// A lease waiter hears releases through LISTEN/NOTIFY: an attempt that finds its key busy
/// LISTENs on the key's channel (release_channel) and tries again at once, so a release between
/// the attempt and the LISTEN is not missed; later, a notification drained means try again.
/// The holder stops listening (best effort: what still arrives is dropped by every statement).
class ListenSignal final : public sql::ReleaseSignal {
 public:
  ListenSignal(std::shared_ptr<Connection> conn, std::string prefix) : conn_(std::move(conn)), prefix_(std::move(prefix)) {}
  void holding(const std::string& key) override;
  Result<bool> busy(const std::string& key, Millis left) override;
  int fd() const override { return conn_->socket(); }
  void consume() override { conn_->drain_notifications(); }

 private:
  std::shared_ptr<Connection> conn_;
  std::string prefix_;
};

/// The connection as the strategies of src/backends/common see it (sql_session.hpp): each
/// statement one round trip, its parameters sent as text (the statements cast them: `$n::bigint`).
class Session final : public sql::Session {
 public:
  Session(std::shared_ptr<Connection> conn, std::string prefix) : conn_(conn), signal_(std::move(conn), std::move(prefix)) {}
  Result<sql::Rows> run(const sql::Statement& st, const sql::Params& params) override;
  Result<void> exec(std::string_view sql) override;
  Result<void> reconnect(const Error& why) override;
  /// 42P01 (no such table), 42703 (no such column).
  bool schema_missing(const Error& failed) const override { return failed.sqlstate == "42P01" || failed.sqlstate == "42703"; }
  std::string where() const override { return conn_->where(); }
  sql::ReleaseSignal& release_signal() override { return signal_; }

 private:
  std::shared_ptr<Connection> conn_;
  sql::CompiledCache compiled_{sql::PlaceholderStyle::dollar};
  ListenSignal signal_;
};

/// The server-side name of a prepared statement (Statement::prepared): "dblock_" and the hash
/// of its text.
std::string prepared_name(const std::string& sql);
/// Quotes an identifier that core already validated ([A-Za-z_][A-Za-z0-9_]*).
std::string quote_ident(std::string_view name);
/// SQL for "this timestamptz column as epoch milliseconds (bigint)".
std::string ms(std::string_view expr);

}  // namespace dblock::postgres

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
  Result<void> start_connection(const std::vector<const char*>& keys, const std::vector<const char*>& values);
  Error broken(std::string_view doing);
  Error broken_and_closed(std::string_view doing);
  Result<void> flush(Millis deadline);
  Result<PGresult*> next_result(Millis deadline);
  void drop_stale_notifications();
  Error timed_out();
  Dsn dsn_;
  BackendOptions options_;
  ConnectionRole role_;
  ConnPtr conn_;
  std::string channel_;  // empty: not listening
  bool deferred_ = false;
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

/// Quotes an identifier that core already validated ([A-Za-z_][A-Za-z0-9_]*).
std::string quote_ident(std::string_view name);
/// SQL for "this timestamptz column as epoch milliseconds (bigint)".
std::string ms(std::string_view expr);

}  // namespace dblock::postgres

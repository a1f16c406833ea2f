#pragma once
// One libpq connection with every statement time-bounded: the asynchronous API plus poll()
// on PQsocket against a CLOCK_BOOTTIME deadline, so an unreachable server cannot hang dblock.

#include <libpq-fe.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends/common/dsn.hpp"
#include "core/backend.hpp"
#include "core/sql/sql_session.hpp"

namespace dblock::postgres {

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
  static std::unique_ptr<Connection> deferred(const Dsn& dsn, const BackendOptions& options);

  /// Runs sql with `values` for $1, $2... (several statements allowed without values) within
  /// io_timeout + extra. On timeout the query is cancelled and the connection closed
  /// (ErrorKind::connection). A statement `named_by` runs again is prepared under a name, once
  /// that session is seen served directly (sql::served_directly); null: nothing is named.
  Result<sql::Rows> exec(std::string_view sql, const std::vector<const sql::Value*>& values = {},
                         Millis extra = Millis{0}, sql::Session* named_by = nullptr);

  /// exec in two halves: send() sends the statement (an error: it was not sent), answer() waits
  /// for its answer, which must be read before the connection runs anything else. Meanwhile the
  /// caller may wait on another connection, so the two round trips overlap.
  Result<void> send(std::string_view sql, const std::vector<const sql::Value*>& values = {}, Millis extra = Millis{0},
                    sql::Session* named_by = nullptr);
  Result<sql::Rows> answer();

  /// Names `sql` (n parameters) now, where exec would on its second run, so its first run is
  /// not parsed (sql::Session::prepare). Best effort: a failure is the next statement's to say.
  /// Its answer is not waited for: the next exec reads it, and sends a statement named so
  /// without waiting for it (the two then cost one round trip between them at most).
  /// `ask` false: only where the session is known served directly, or naming is decided already.
  void prepare(std::string_view sql, int n, sql::Session* named_by, bool ask = true);

  /// Declares the types of `compiled`'s parameters for every send and parse of its text: int8
  /// for those core binds as integers (sql::integer_parameter), so a NULL and a statement parsed
  /// ahead of its values type them as a value does, and no text casts them; the others the
  /// server infers.
  void declare(const sql::Compiled& compiled);

  /// The next send's statement runs by its name (prepare's) even behind statements sent ahead of
  /// it in its group, where a name is otherwise not used (name_for's reason: a Parse there takes
  /// now() from the group's start). For a statement whose time is its own (clock_timestamp()),
  /// parsed while it waited: a wait in the server ahead of it then leaves only its Bind and
  /// Execute after the wait. Once.
  void name_next_in_group() { name_in_group_ = true; }
  /// Sends `sql` (one statement) with `values` to run ahead of the next exec's statement, in its
  /// round trip and with its fate: an error in either skips the rest, and that exec reports the
  /// first. For a statement that needs no answer of its own (a transaction's BEGIN). Where libpq
  /// has no pipeline mode, it runs at once and its error is returned here.
  Result<void> send_ahead(std::string_view sql, const std::vector<const sql::Value*>& values = {});
  /// Sends `sql` (one statement, `values`) without waiting for its answer, which the next
  /// statement reads and drops, or closing does: a ROLLBACK that nothing after it depends on.
  void send_unawaited(std::string_view sql, const std::vector<sql::Value>& values = {});
  /// Sends `sql` (one statement that ends a transaction: a refused lock's ROLLBACK) in a group of
  /// its own ahead of the next exec's statement, in that statement's write and round trip, where
  /// it used to be a round trip of its own; what is made ready meanwhile (prepare) goes between
  /// the two, the session idle by then. Its answer is read with that exec's: should it have
  /// failed, the connection is closed (the transaction ends with it) and that exec reports it.
  /// Where libpq has no pipeline mode, or statements wait to go in the next exec's group, it
  /// runs at once.
  Result<void> end_ahead(std::string_view sql);
  /// Sends `sql` (one statement) with `values` ahead of the next exec's statement, in its round
  /// trip but in a transaction of its own (a Sync ends it), so the statement after it takes its
  /// snapshot and now() only once it has ended: a wait in the server (a lock) that the next
  /// statement then follows without a round trip between. That exec may take `extra` longer.
  /// Its answer is kept for ahead_answer().
  Result<void> send_ahead_synced(std::string_view sql, const std::vector<const sql::Value*>& values, Millis extra);
  /// What the statement send_ahead_synced sent answered, once the exec after it ran: "" for
  /// success, the SQLSTATE of its error; nullopt when none was sent or its answer was lost.
  std::optional<std::string> ahead_answer() { return std::exchange(ahead_answer_, std::nullopt); }
  /// Sends `sql` (one statement, `values`) right after the next exec's statement, in the same
  /// round trip and in a transaction of its own (after that statement's has ended); its answer
  /// is read with that exec's and dropped. Where libpq has no pipeline mode, it runs after it.
  void send_after_next(std::string sql, std::vector<sql::Value> values) {
    trailer_ = std::move(sql);
    trailer_values_ = std::move(values);
  }

  /// Sends `sql` (one statement, `values`) right after the next exec's statement, in its round
  /// trip and in the same group (one Sync): skipped when that statement fails, and its own error
  /// is that exec's; that exec answers its statement's rows. For a COMMIT that must follow only a
  /// statement that succeeded. Where libpq has no pipeline mode, it runs after it, when it
  /// succeeded.
  void send_in_group_after_next(std::string sql, std::vector<sql::Value> values = {}) {
    follower_ = std::move(sql);
    follower_values_ = std::move(values);
  }

  /// Whether this server session serves the statements itself, no pooler between
  /// (sql::served_directly, asked on `asking` once per server session).
  Result<bool> served_directly(sql::Session& asking);
  /// Whether served_directly said yes for this server session already (no round trip).
  bool known_served_directly() const { return direct_for_ == conn_.get() && conn_ && direct_; }
  /// served_directly's answer for this server session, found by the caller: true.
  void seen_served_directly() {
    direct_ = true;
    direct_for_ = conn_.get();
  }
  /// True while a transaction is open and healthy on this connection.
  bool in_transaction() const {
    if (!is_open()) return false;
    const auto status = PQtransactionStatus(conn_.get());
    return status == PQTRANS_INTRANS || (status == PQTRANS_ACTIVE && pipe_.in_transaction);
  }
  /// True while a transaction is open, healthy or failed (a ROLLBACK is due).
  bool transaction_open() const { return in_transaction() || (is_open() && PQtransactionStatus(conn_.get()) == PQTRANS_INERROR); }
  /// True while the connection is usable.
  bool is_open() const { return conn_ && PQstatus(conn_.get()) == CONNECTION_OK; }
  /// Closes and opens again, LISTENing again.
  Result<void> reconnect();
  /// Closes the connection: any session lock it held is gone.
  void close() {
    conn_.reset();
    pipe_ = {};
    ahead_answer_.reset();
    corked_ = false;
    sent_.reset();
    follower_.clear();
    follower_values_.clear();
  }

  /// LISTENs on channel, and only on it, now and after every reconnect.
  Result<void> listen(const std::string& channel);
  /// Whether this connection LISTENs on channel.
  bool listening(const std::string& channel) const { return !channel_.empty() && channel_ == channel; }
  /// Stops listening. From then on every statement drops the notifications it reads, so
  /// none pile up in libpq while nobody calls drain_notifications().
  Result<void> unlisten();
  /// The socket to poll for notifications, or -1.
  int socket() const { return is_open() ? PQsocket(conn_.get()) : -1; }
  /// Reads what arrived and drops the notifications; true if there was at least one.
  bool drain_notifications();

  /// The server process that started this connection (a pooler's own, behind one).
  int backend_pid() const { return is_open() ? PQbackendPID(conn_.get()) : 0; }
  const std::string& where() const { return dsn_.redacted; }
  /// TLS and peer of the open connection (doctor); nullopt when closed.
  std::optional<sql::Transport> transport() const;

 private:
  struct Finish {
    void operator()(PGconn* c) const { PQfinish(c); }
  };
  Connection(Dsn dsn, BackendOptions options, ConnectionRole role)
      : dsn_(std::move(dsn)), options_(std::move(options)), role_(role) {}
  Result<void> start_connection(std::vector<const char*> keys, std::vector<const char*> values);
  Error broken(std::string_view doing) const;
  Result<void> await(short events, Millis deadline);
  using Owned = std::unique_ptr<PGresult, decltype(&PQclear)>;
  /// What a sent statement answered: the first error result (null: none), the last result,
  /// and the error's SQLSTATE.
  struct Collected {
    Owned error;
    Owned last;
    std::string sqlstate;
  };
  Result<Collected> collect(Millis deadline);
  // libpq's pipeline mode, in use while statements went out whose answers were not read yet:
  // `background` Syncs whose groups' answers nobody waits for (send_unawaited, prepare), and
  // `queued` statements that go with the next exec's (send_ahead).
  struct Pipeline {
    int background = 0;
    int queued = 0;
    int trailing = 0;         // groups sent after the exec's own (send_after_next)
    bool following = false;   // a statement follows the exec's in its group (send_in_group_after_next)
    bool keep_first = false;  // the first background group's answer is kept (send_ahead_synced)
    int ending = 0;           // the background group (from 1) that ends a transaction (end_ahead), or 0
    // Background groups sent inside a healthy transaction that leave it so (a preparation in a
    // savepoint): libpq says a statement is in progress until they are read, the transaction is open.
    bool in_transaction = false;
  };
  bool piping() const { return pipe_.background > 0 || pipe_.queued > 0 || pipe_.trailing > 0 || pipe_.following; }
  Result<void> enter_pipeline();
  // TCP_CORK on the socket: what libpq flushes Sync by Sync leaves in one segment once uncorked.
  void cork(bool on);
  Result<void> flush(Millis deadline);
  // The answers of the groups sent (a Sync ends each), `ours` (the last group's, an exec's)
  // kept as collect() keeps them, the others dropped; the pipeline then ends.
  Result<Collected> collect_piped(Millis deadline, bool ours);
  // Reads and drops every answer not read yet.
  Result<void> drain(Millis deadline);
  Result<std::string> name_for(const std::string& text, int n, sql::Session* named_by, Millis deadline, bool now,
                               bool ask = true);
  static sql::Rows rows_of(const PGresult* last);
  /// declare()'s types of `sql`'s parameters; nullptr: the server infers them all.
  const Oid* types_of(const std::string& sql) const;

  Dsn dsn_;
  BackendOptions options_;
  ConnectionRole role_;
  std::unique_ptr<PGconn, Finish> conn_;
  std::string channel_;  // empty: not listening
  bool deferred_ = false;
  // Each statement text run on this server session (for the PGconn named_for_: a reconnect
  // starts afresh) and its prepared name's number, 0 while it has run once only; naming_ false
  // behind a pooler, or once a name was lost (exec).
  std::unordered_map<std::string, int> names_;
  // declare()'s: each statement text with an integer parameter and its parameters' types.
  std::unordered_map<std::string, std::vector<Oid>> types_;
  int prepared_ = 0;  // the names given on this server session
  const PGconn* named_for_ = nullptr;
  bool naming_ = true;
  bool name_in_group_ = false;  // name_next_in_group(), for the next send
  bool generic_plans_ = false;  // the session keeps one plan for every run (session_options)
  Pipeline pipe_;  // of conn_: reset with it
  Millis ahead_extra_{0};                     // send_ahead_synced's extra, for the next exec
  std::optional<std::string> ahead_answer_;   // ahead_answer()
  std::string trailer_;                       // send_after_next's statement, or ""
  std::string follower_;                      // send_in_group_after_next's statement, or ""
  std::vector<sql::Value> follower_values_;   // and its values
  std::vector<sql::Value> trailer_values_;
  bool corked_ = false;  // cork()
  // What send() sent, until answer() reads its answer (exec's again after a lost name).
  struct Sent {
    Millis deadline;
    bool by_name = false, piped = false;
    std::string sql;
    std::vector<sql::Value> values;
    Millis extra;
    sql::Session* named_by = nullptr;
    std::string trailer;
    std::vector<sql::Value> trailer_values;
    std::string follower;
    std::vector<sql::Value> follower_values;
  };
  std::optional<Sent> sent_;
  const PGconn* direct_for_ = nullptr;  // the server session `direct_` was asked on
  bool direct_ = false;
};

/// The connection as the strategies of core/sql see it (sql_session.hpp), its
/// parameters sent as text (the statements cast them). A lease waiter hears releases through
/// LISTEN/NOTIFY, and waits in the server for its holder's handoff lock (ListenWake).
class Session final : public sql::Session {
 public:
  Session(std::shared_ptr<Connection> conn, std::string prefix);
  Result<sql::Rows> run(const sql::Statement& st, const sql::Params& params) override { return run(st, params, Millis{0}); }
  /// run() of a statement that may wait `extra` longer than the I/O timeout (for a lock).
  Result<sql::Rows> run(const sql::Statement& st, const sql::Params& params, Millis extra);
  /// In a pipeline (Connection::send_ahead_synced): one round trip.
  Result<sql::Rows> run_behind(const sql::Statement& ahead, const sql::Params& ahead_params, const sql::Statement& st,
                               const sql::Params& params, Millis bound, sql::AheadAnswer& answer) override;
  Result<void> exec(std::string_view sql) override;
  void prepare(const sql::Statement& st) override;
  void prepare_unasked(const sql::Statement& st) override;
  /// run() in two halves (Connection::send, Connection::answer).
  Result<void> send(const sql::Statement& st, const sql::Params& params, Millis extra);
  Result<sql::Rows> answer() { return conn_->answer(); }
  /// Connection::send_ahead of `st` with `params`.
  Result<void> send_ahead(const sql::Statement& st, const sql::Params& params);
  Result<void> reconnect(const Error&) override { return conn_->reconnect(); }
  std::string where() const override { return conn_->where(); }
  std::optional<sql::Transport> transport() const override { return conn_->transport(); }
  sql::Waiters& release_signal() override { return waiters_; }
  std::int64_t started_id() const override { return conn_->backend_pid(); }
  void served_directly_seen() override { conn_->seen_served_directly(); }

 private:
  std::shared_ptr<Connection> conn_;
  sql::CompiledCache compiled_{sql::PlaceholderStyle::dollar};
  sql::Waiters waiters_;
};

/// The server process that runs a statement (postgres_statements.cpp, doctor.session_id).
sql::Statement session_id_statement();

/// The native-error mapping (postgres_error.cpp): the error a failed statement result carries,
/// by its SQLSTATE; `where` is the redacted DSN.
Error statement_error(const PGresult* result, PGconn* conn, std::string_view where);
/// The error of a failed connection attempt: by the server's SQLSTATE when it sent one, else by
/// what libpq tells structurally (`ssl_required`: sslmode require or verify-*), never by the
/// message text, which a server translates.
Error connect_error(PGconn* conn, std::string_view where, bool reached_server, bool ssl_required);

}  // namespace dblock::postgres

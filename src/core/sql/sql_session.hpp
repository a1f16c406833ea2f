#pragma once
// What a backend is to the strategies of core/sql: a session that runs one named
// statement with named parameters and gives the rows back as text, its transactions, its
// native error codes turned into ErrorKind (core/error.hpp), a reconnect, and how a waiter hears
// a release (its wake primitive, waiters.hpp). Everything else (what to run, in which order,
// what the answer means) is the strategies' (lease_locker.cpp, ...), written once for every
// dialect.
//
// Statements are SQL text written whole in each dialect's <name>_statements.cpp, with named
// placeholders (`:key`, `:ttl_ms`) that each session turns into its own kind ($1, ?, ?1) once
// per statement: a reader sees one statement whole, and adding a parameter shifts no other.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "core/error.hpp"
#include "core/lock_types.hpp"
#include "core/sql/waiters.hpp"

namespace dblock::rows {

/// One result row of the backend's client library, read by 0-based column index. Each backend
/// adapts its own row type in a few lines.
class ColumnReader {
 public:
  virtual ~ColumnReader() = default;
  virtual bool is_null(int column) const = 0;
  /// "" for NULL.
  virtual std::string text(int column) const = 0;
  /// Only called on a column that is not NULL.
  virtual std::int64_t int64(int column) const = 0;

  std::optional<std::int64_t> opt_int64(int column) const {
    if (is_null(column)) return std::nullopt;
    return int64(column);
  }
};

}  // namespace dblock::rows

namespace dblock::sql {

/// A bound value: NULL, an integer or text (a key is bytes; SQLite compares an integer and a
/// text differently, so the kind is kept).
using Value = std::variant<std::monostate, std::int64_t, std::string>;

/// Named values for a statement's placeholders; a placeholder without a value is
/// ErrorKind::internal (never sent), a value without a placeholder is ignored.
class Params {
 public:
  Params() = default;
  Params(std::initializer_list<std::pair<std::string_view, Value>> values);
  Params& set(std::string_view name, Value value);
  /// Each of `other`'s values set here (two statements bound together).
  Params& set(const Params& other);
  /// nullptr when `name` has no value.
  const Value* find(std::string_view name) const;

 private:
  std::vector<std::pair<std::string, Value>> values_;
};

/// An integer value or NULL.
inline Value value_of(const std::optional<std::int64_t>& v) { return v ? Value(*v) : Value(); }
inline Value value_of(const std::optional<int>& v) { return v ? Value(std::int64_t{*v}) : Value(); }
inline Value ms_value(Millis m) { return Value(std::int64_t{m.count()}); }

/// One statement of a dialect: `id` names it in messages and in a session's cache of prepared
/// statements; `text` is the SQL with named placeholders. An empty text: the dialect has no
/// such statement (the caller says what it does instead).
struct Statement {
  std::string id;
  std::string text;
  bool empty() const { return text.empty(); }
};

/// The rows of one statement, every value as text (NULL kept), and how many rows it changed.
class Rows {
 public:
  using Cell = std::optional<std::string>;

  /// One row, read by 0-based column.
  class Row final : public rows::ColumnReader {
   public:
    explicit Row(const std::vector<Cell>& cells) : cells_(&cells) {}
    bool is_null(int column) const override { return !cell(column).has_value(); }
    std::string text(int column) const override { return cell(column).value_or(std::string()); }
    /// A boolean column reads as 1 or 0 whatever the dialect spells it ('t', 'true').
    std::int64_t int64(int column) const override;
    int columns() const { return static_cast<int>(cells_->size()); }

   private:
    const Cell& cell(int column) const { return (*cells_)[static_cast<std::size_t>(column)]; }
    const std::vector<Cell>* cells_;
  };

  std::size_t size() const { return rows_.size(); }
  bool empty() const { return rows_.empty(); }
  Row operator[](std::size_t i) const { return Row(rows_[i]); }
  void add(std::vector<Cell> row) { rows_.push_back(std::move(row)); }

  /// Rows inserted, updated or deleted (or returned, for a SELECT): what a conditional
  /// statement's caller tests.
  std::int64_t affected = 0;

 private:
  std::vector<std::vector<Cell>> rows_;
};

/// How a dialect writes a placeholder.
enum class PlaceholderStyle {
  dollar,    // PostgreSQL: $1, $2 ...; a name used twice keeps its number
  numbered,  // SQLite: ?1, ?2 ...; the same
  question,  // MySQL: ? each time; a name used twice is bound twice
};

/// A statement's text with the dialect's placeholders, and the name of each, in binding order.
struct Compiled {
  std::string text;
  std::vector<std::string> names;
};
/// Replaces each `:name` outside quotes ('...', "...", `...`) by the style's placeholder. `::`
/// (a PostgreSQL cast) and `:=` are left alone.
Compiled compile(std::string_view text, PlaceholderStyle style);

/// Each statement's text compiled once per session, keyed by the text (two statements may
/// share an id: a table read with and without a column).
class CompiledCache {
 public:
  explicit CompiledCache(PlaceholderStyle style) : style_(style) {}
  const Compiled& get(const Statement& st);

 private:
  PlaceholderStyle style_;
  std::unordered_map<std::string, Compiled> compiled_;
};

/// The values of `compiled.names` from `params`, in order; ErrorKind::internal naming the
/// statement and the first placeholder without a value.
Result<std::vector<const Value*>> bind_order(const Compiled& compiled, const Params& params, std::string_view id);

struct SchemaStatements;  // statements.hpp

/// What carries a session to its server, for doctor's tls line (dblock(1), doctor). Every
/// connection of one command is opened from the same DSN, so one session tells for all.
struct Transport {
  bool local = false;    // a Unix socket or a loopback address: nothing crosses a network
  std::string peer;      // the address connected to ("127.0.0.1", "/run/mysqld/mysqld.sock")
  bool encrypted = false;
  std::string protocol;  // "TLSv1.3", when encrypted
  std::string cipher;
  bool ca_verified = false;    // the server's certificate was checked against a CA
  bool host_verified = false;  // ... and its names against the host connected to
  bool password = false;       // a password was given for the login
  std::string how_to_verify;   // the DSN parameters that require TLS and verify the server
};
/// The doctor line for `t`: ok when encrypted or local; a warning (still ok) when a password
/// crosses a network unencrypted, or when TLS does not verify the server.
DoctorCheck transport_check(const Transport& t);

/// One database session.
class Session {
 public:
  virtual ~Session() = default;

  /// Runs `st` with `params` bound by name; rows as text. ErrorKind::connection when the server
  /// is gone or the statement timed out.
  virtual Result<Rows> run(const Statement& st, const Params& params) = 0;
  /// run() of `st` behind `ahead`, a wait in the server (Waiters::ahead), in one round trip where
  /// the dialect can: `ahead` first, in a transaction of its own (so `st` reads its time and
  /// snapshot once the wait is over), within `bound` more than a statement's time, then `st`,
  /// whatever `ahead` answered. The rows of `st`; what `ahead` told in `answer`. Here: two round
  /// trips, `ahead` told by its error kind.
  virtual Result<Rows> run_behind(const Statement& ahead, const Params& ahead_params, const Statement& st,
                                  const Params& params, Millis bound, AheadAnswer& answer);
  /// Runs SQL without parameters (BEGIN, COMMIT, ROLLBACK, DDL); rows are dropped.
  virtual Result<void> exec(std::string_view sql) = 0;
  /// exec() of the last statement of a finished run (Transaction::commit_last), after which the
  /// process exits: a dialect may send it and end the session without waiting for the answer,
  /// where the server runs what it was sent before it ends the session (a later statement then
  /// runs on a session opened again).
  virtual Result<void> exec_last(std::string_view sql) { return exec(sql); }
  /// A hint: `st` runs on this session later, at a moment someone waits for it (a release, a
  /// waiter numbering its row once its lock is granted). A dialect may parse it now, while no one
  /// waits, so that run skips the work; one that cannot does nothing. A failure here is the
  /// later run's to report.
  virtual void prepare(const Statement& /*st*/) {}
  /// prepare(), where it costs no round trip now: a dialect that would first have to ask the
  /// server whether a name survives (a pooler) and has not learnt it yet does nothing. For a hint
  /// given while the command runs, which may end before any answer comes.
  virtual void prepare_unasked(const Statement& st) { prepare(st); }

  /// Closes and opens again (a lease survives a short outage); ErrorKind::connection when the
  /// server still cannot be reached. A session that cannot reconnect returns `why`.
  virtual Result<void> reconnect(const Error& why) = 0;

  /// Where the session's database is, for messages: the file, or the redacted DSN.
  virtual std::string where() const = 0;
  /// How the session reaches its server; nullopt for a file (SQLite).
  virtual std::optional<Transport> transport() const { return std::nullopt; }

  /// How this session's waiters hear releases: its waiters' queue over the dialect's wake
  /// primitive (waiters.hpp).
  virtual Waiters& release_signal() = 0;
  /// The server's id of this session, as the connection was handed it at start-up (a pooler
  /// hands out its own: pooler.hpp); 0 where the dialect has none.
  virtual std::int64_t started_id() const { return 0; }
  /// Told that the server session it was handed at start-up answered (pooler.hpp,
  /// session_strategy_allowed), which a dialect that asks the same (PostgreSQL, before it names
  /// a prepared statement) may keep instead of asking again.
  virtual void served_directly_seen() {}

  /// After `failed`, which a statement of the run path returned: when ErrorKind::schema_missing
  /// (the dialect's error mapping sets it from native codes), creates or
  /// completes the schema (core/sql/schema.hpp) and returns true (the caller runs its operation
  /// once more); false when `failed` stands. A table of the wrong shape is ErrorKind::config
  /// naming the column.
  Result<bool> repair_schema(const Error& failed);
  /// The tables this session's statements use, which repair_schema makes (set by its Backend).
  void set_schema(std::shared_ptr<const SchemaStatements> schema) { schema_ = std::move(schema); }
  const SchemaStatements* schema() const { return schema_.get(); }

 private:
  std::shared_ptr<const SchemaStatements> schema_;
};

/// What a wait run ahead of a statement (Session::run_behind) told by its answer `waited`: its
/// bound came first when it failed so (ErrorKind::wait_ended) or answered got 0 (its first
/// column); untold when it failed otherwise; else it let the statement in.
AheadAnswer ahead_answer(const Result<Rows>& waited);

/// BEGIN ... COMMIT on a session, rolled back when destroyed uncommitted (RAII): the statements
/// of one lock operation that must hold or fail together.
class Transaction {
 public:
  static Result<Transaction> begin(Session& session, std::string_view begin_sql);
  Transaction(Transaction&& other) noexcept : session_(std::exchange(other.session_, nullptr)) {}
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction();
  Result<void> commit();
  /// commit() as a finished run's last statement (Session::exec_last): `last` false is commit().
  Result<void> commit_last(bool last);

 private:
  explicit Transaction(Session& session) : session_(&session) {}
  Session* session_;
};

// The two ways every locker of this folder runs a statement again (lease_locker.cpp,
// session_locker.cpp, shedlock_locker.cpp, lock_steps.cpp).

/// `attempt` once, and once more after session.repair_schema() made the missing schema: the run
/// path assumes the tables (backend.hpp, make_locker). Each attempt cleans up after itself.
template <class F>
auto with_schema(Session& session, F&& attempt) -> decltype(attempt()) {
  auto first = attempt();
  if (first) return first;
  auto repaired = session.repair_schema(first.error());
  if (!repaired) return std::unexpected(repaired.error());
  if (!*repaired) return first;
  return attempt();
}

/// How often with_retry runs a statement that the server rolled back as a conflict.
inline constexpr int conflict_attempts = 4;

/// `statement` once, once more after a reconnect when the connection failed (a lease survives
/// a short outage), and again, up to conflict_attempts in all, when the server rolled it back
/// as a conflict (busy: a deadlock, or a Galera certification failure against another node's
/// write of the same rows). Every statement after the acquisition is compared on its holder,
/// so running it again is safe.
template <class F>
auto with_retry(Session& session, F&& statement) -> decltype(statement()) {
  auto result = statement();
  for (int conflicts = 1; !result && held_elsewhere(result.error().kind) && conflicts < conflict_attempts; ++conflicts)
    result = statement();
  if (result || result.error().kind != ErrorKind::connection) return result;
  if (auto ok = session.reconnect(result.error()); !ok) return std::unexpected(ok.error());
  return statement();
}

}  // namespace dblock::sql

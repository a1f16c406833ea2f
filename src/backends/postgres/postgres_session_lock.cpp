// The holder session of the session strategies (core/sql/session_locker.hpp), which run there
// the statements of lock_statements (postgres_statements.cpp): advisory pg_advisory_lock on the
// key's 64-bit hash, outside any transaction, so a plain key's row is numbered in the statement
// that takes it; for-update and txn-insert the key's <prefix>claims row, their transaction held
// open, its lock wait the transaction's lock_timeout.
#include "backends/postgres/postgres_tables.hpp"
#include "core/sql/session_locker.hpp"

namespace dblock::postgres {
namespace {

class PostgresHolder final : public sql::HolderSession {
 public:
  PostgresHolder(std::shared_ptr<Connection> holder, std::string prefix, Millis io_timeout,
                 std::shared_ptr<Connection> book_conn, std::shared_ptr<Session> book, const sql::LockStatements& st)
      : holder_(holder), session_(std::move(holder), prefix), prefix_(std::move(prefix)), io_timeout_(io_timeout),
        book_conn_(std::move(book_conn)), book_(std::move(book)), gate_take_(st.gate_take), gate_wait_(st.gate_wait),
        gate_give_(st.gate_give) {}

  Result<void> send(const sql::Statement& st, const sql::Params& p, Millis wait) override {
    if (auto ok = begin_now(); !ok) return ok;
    return session_.send(st, p, wait);
  }
  Result<sql::Rows> answer() override {
    auto r = session_.answer();
    if (chained_) settle(r && r->affected > 0, !r && r.error().sqlstate == "55P03");
    return r;
  }
  // Sent already: a wait is cut short with the session (the next take opens it anew), an
  // answer that comes at once is read.
  void withdraw(bool waits) override {
    if (waits) holder_->close();
    else (void)session_.answer();
    if (chained_) settle(false, false);
  }

  // The numbering chained to the grant in the server. The holder session takes the numbering
  // gate (a session advisory lock of its own, on a hash of the key and its server process, so no
  // other session takes it) in the lock statement's pipeline group, ahead of it, and lets it go
  // right after it in the same group: skipped when the lock statement fails, so the gate opens
  // only once the lock is granted, or when the session ends, or when settle() lets it go. The
  // bookkeeping session waits for the gate, for as long as the holder waits for the lock, ahead
  // of `number` in one pipeline group: a wait that ends in lock_timeout (the slice over, the
  // gate still held) skips it, and only a wait let in runs it (each statement of a READ
  // COMMITTED transaction takes its own snapshot; its time is its own, Dialect::clock). It
  // proves the grant (LockStatements::row_numbered): opened by anything but the grant, it
  // numbers nothing, and core numbers as before. The gate's statements are core's
  // (LockStatements::gate_*), over the dialect's session lock.
  // No holder tag follows a lock statement here (`before_tag` never holds).
  Result<void> send_numbering(const sql::Statement& st, const sql::Params& p, Millis wait, const sql::Statement& number,
                              const sql::Params& np, bool) override {
    numbered_.reset();
    if (gate_take_.empty() || !book_ || book_conn_ == holder_ || !book_conn_->is_open() || !holder_->is_open())
      return send(st, p, wait);
    // Taken in a round trip of its own the first time, so that the wait below cannot reach the
    // server first; kept from then on (settle()), so once per session until a grant.
    if (gate_on_ == 0 || gate_on_ != holder_->backend_pid()) {
      gate_ = key_hash(prefix_, "\x04numbering " + std::to_string(holder_->backend_pid()));
      auto take = gate_values(gate_take_);
      if (!take) return std::unexpected(take.error());
      if (auto ok = holder_->exec(gate_take_.text, refs(*take)); !ok) return std::unexpected(ok.error());
      gate_on_ = holder_->backend_pid();
    }
    auto give = gate_values(gate_give_);
    auto gate_wait = gate_values(gate_wait_, wait);
    if (!give) return std::unexpected(give.error());
    if (!gate_wait) return std::unexpected(gate_wait.error());
    if (auto ok = begin_now(); !ok) return ok;
    holder_->send_in_group_after_next(gate_give_.text, std::move(*give));
    if (auto ok = session_.send(st, p, wait); !ok) return ok;
    if (!book_conn_->send_ahead(gate_wait_.text, refs(*gate_wait))) return {};
    // Parsed ahead (core prepares it with the take): after the gate only its plan and run.
    book_conn_->name_next_in_group();
    if (!book_->send(number, np, wait)) return {};
    chained_ = true;
    return {};
  }
  std::optional<Result<sql::Rows>> numbered() override { return std::exchange(numbered_, std::nullopt); }
  Result<void> exec(std::string_view sql) override { return session_.exec(sql); }
  // In its own group, in the write of the BEGIN, lock timeout and lock statement that follow
  // (Connection::end_ahead): they run only once it has ended the refused transaction.
  Result<void> rollback_ahead() override { return holder_->end_ahead("ROLLBACK"); }
  // COMMIT in the statement's round trip and its pipeline group: skipped when it failed.
  Result<sql::Rows> run_and_commit(const sql::Statement& st, const sql::Params& p) override {
    if (auto ok = begin_now(); !ok) return std::unexpected(ok.error());
    holder_->send_in_group_after_next("COMMIT");
    return session_.run(st, p, Millis(0));
  }
  // lock_timeout for the transaction just begun (set_config's is_local): it ends with it. Both
  // go with the lock statement that follows, in its round trip (begin_now), after anything that
  // statement needs first (send_numbering's gate).
  Result<void> begin(const sql::LockStatements& st, const sql::Params& p, Millis) override {
    begun_ = Begun{st.begin, st.lock_wait, p};
    return {};
  }
  Result<sql::Rows> run(const sql::Statement& st, const sql::Params& p, Millis wait) override {
    if (auto ok = begin_now(); !ok) return std::unexpected(ok.error());
    return session_.run(st, p, wait);
  }
  // Named (Connection::prepare), its own Sync ahead of the BEGIN that follows; run by name
  // inside the transaction. Should the name be missing there after all, the statement fails and
  // the transaction with it (the lock held until the ROLLBACK), and core releases apart.
  void prepare(const sql::Statement& st) override { session_.prepare(st); }
  // In a savepoint rolled back after it (Connection::name_for): a Parse that failed ends the
  // savepoint, not the transaction.
  void prepare_held(const sql::Statement& st) override { session_.prepare_unasked(st); }
  void close() override { holder_->close(); }
  Result<void> reopen() override { return holder_->reconnect(); }
  bool transaction_open() const override { return holder_->transaction_open(); }
  std::string session_id() const override { return std::to_string(holder_->backend_pid()); }
  int socket() const override { return holder_->socket(); }
  Millis server_wait(Millis wait, bool) const override { return wait; }

  // :lock, the key's hash, and its halves :hi and :lo as two ints; :lock_timeout, the wait.
  // An attempt that must not wait learns that another holds the key from its statement itself
  // (for-update's NOWAIT, txn-insert's pg_try_advisory_xact_lock), at once; lock_timeout is then
  // for the table's lock, which a DDL in progress (a first run's CREATE, a DBA's ALTER TABLE or
  // VACUUM FULL) holds for a while, and which says nothing about the key: half the I/O timeout,
  // so the server gives up before the client does (0 would make it "wait forever").
  void bind(sql::Params& p, const std::string& key, Millis wait) const override {
    if (wait.count() <= 0) wait = std::max(io_timeout_ / 2, Millis(1));
    const std::int64_t id = key_hash(prefix_, key);
    const auto bits = static_cast<std::uint64_t>(id);
    p.set("lock", id)
        .set("hi", std::int64_t{static_cast<std::int32_t>(bits >> 32)})
        .set("lo", std::int64_t{static_cast<std::int32_t>(bits & 0xffffffffULL)})
        .set("lock_timeout", std::to_string(wait.count()) + "ms");
  }

  // The server queues waiters itself: nothing to hear.
  sql::Waiters& release_signal() override { return no_signal_; }

 private:
  std::shared_ptr<Connection> holder_;
  Session session_;  // on holder_
  std::string prefix_;
  Millis io_timeout_;  // a statement's bound (BackendOptions::io_timeout)
  sql::Waiters no_signal_;

  // After a lock statement sent with a chained numbering answered (`taken`: it took the lock):
  // the numbering's answer read, so nothing of it is pending. A slice that ended in
  // lock_timeout (`timed_out`) keeps the gate: the numbering's wait ends with its own, at about
  // the same moment, and skips it. Anything else that took nothing ends the lock statement's
  // transaction (whatever it took goes back) and lets the gate go, so the numbering runs and
  // finds no grant; the gate is taken again at once, for the next attempt (the numbering's
  // wait, granted by the give-back, ends first).
  void settle(bool taken, bool timed_out) {
    chained_ = false;
    if (taken) {
      gate_on_ = 0;  // let go with the lock statement
    } else if (!holder_->is_open()) {
      gate_on_ = 0;
    } else if (!timed_out && !regate()) {
      gate_on_ = 0;
    }
    numbered_ = book_->answer();
  }
  // The ROLLBACK in a group of its own, then the gate given back and taken again in one group
  // (skipped should the give-back fail), in one round trip.
  bool regate() {
    auto give = gate_values(gate_give_), take = gate_values(gate_take_);
    return give && take && holder_->end_ahead("ROLLBACK") && holder_->send_ahead(gate_give_.text, refs(*give)) &&
           holder_->exec(gate_take_.text, refs(*take));
  }

  // begin()'s statements, sent ahead of the statement that follows it.
  Result<void> begin_now() {
    if (!begun_) return {};
    const Begun b = std::move(*begun_);
    begun_.reset();
    if (auto ok = holder_->send_ahead(b.begin); !ok) return ok;
    return session_.send_ahead(b.lock_wait, b.p);
  }

  // One of the numbering gate's statements (LockStatements::gate_*), its placeholders libpq's,
  // sent unnamed (each runs once per attempt at most, mostly beside another statement).
  struct GateStatement {
    explicit GateStatement(const sql::Statement& st)
        : id(st.id), compiled(sql::compile(st.text, sql::PlaceholderStyle::dollar)), text(compiled.text) {}
    bool empty() const { return text.empty(); }
    std::string id;
    sql::Compiled compiled;
    std::string text;
  };
  // `g`'s values in its placeholders' order: :gate, the gate as last taken, and :lock_timeout,
  // the wait `wait` (at least 1 ms: 0 would be no bound).
  Result<std::vector<sql::Value>> gate_values(const GateStatement& g, Millis wait = Millis(1)) const {
    const sql::Params p{{"gate", gate_}, {"lock_timeout", std::to_string(std::max(wait, Millis(1)).count()) + "ms"}};
    auto order = sql::bind_order(g.compiled, p, g.id);
    if (!order) return std::unexpected(order.error());
    std::vector<sql::Value> out;
    for (const sql::Value* v : *order) out.push_back(*v);
    return out;
  }
  static std::vector<const sql::Value*> refs(const std::vector<sql::Value>& values) {
    std::vector<const sql::Value*> out;
    for (const sql::Value& v : values) out.push_back(&v);
    return out;
  }

  std::shared_ptr<Connection> book_conn_;  // the bookkeeping session's connection
  std::shared_ptr<Session> book_;          // on book_conn_
  GateStatement gate_take_, gate_wait_, gate_give_;
  std::int64_t gate_ = 0;                  // the numbering gate's lock, as last taken
  int gate_on_ = 0;                        // the holder's server process that holds the gate, or 0
  bool chained_ = false;                   // a numbering was sent with the lock statement, unread
  struct Begun {
    std::string begin;
    sql::Statement lock_wait;
    sql::Params p;
  };
  std::optional<Begun> begun_;  // begin()'s, until the statement that follows
  std::optional<Result<sql::Rows>> numbered_;  // numbered()
};

}  // namespace

Result<std::unique_ptr<Locker>> make_session_locker(Strategy s, std::shared_ptr<Connection> holder, const Dsn& dsn,
                                                   const BackendOptions& options,
                                                   std::shared_ptr<const sql::SchemaStatements> schema,
                                                   sql::failover::ReadCheck serving, std::unique_ptr<Connection> spare) {
  // advisory's lock is held outside any transaction, so its token and history go through the
  // holder session itself; the others hold a transaction open and number the token on a second,
  // autocommit connection, which a holder killed mid-transaction cannot roll back.
  std::shared_ptr<Connection> book = holder;
  if (needs_book(s) && spare) {
    book = std::move(spare);
  } else if (needs_book(s)) {
    auto opened = Connection::open(dsn, options, ConnectionRole::bookkeeping);
    if (!opened) return std::unexpected(opened.error());
    book = std::move(*opened);
  }
  // The holder session reaches the server as the bookkeeping one does (one DSN): whether the
  // lock can hold there is judged on the bookkeeping session's read (serving), and so is whether
  // the holder's release may be named while its transaction is open (prepare_held), which must
  // not cost a round trip of its own.
  if (serving && book != holder)
    serving = [check = std::move(serving), book = book.get(), holder](sql::Session& on, const sql::Rows::Row& row) {
      auto ok = check(on, row);
      if (ok && book->known_served_directly()) holder->seen_served_directly();
      return ok;
    };
  const std::string& prefix = options.table_prefix;
  auto session = std::make_shared<Session>(book, prefix);
  session->set_schema(std::move(schema));  // the tables a statement finds missing are made
  sql::LockStatements statements = lock_statements(prefix);
  auto h = std::make_unique<PostgresHolder>(std::move(holder), prefix, options.io_timeout, std::move(book), session,
                                            statements);
  return sql::make_session_locker(s, std::move(h),
                                  std::move(statements), std::move(session), lease_statements(prefix), prefix,
                                  options.history_keep, std::move(serving));
}

}  // namespace dblock::postgres

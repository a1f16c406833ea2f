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
  PostgresHolder(std::shared_ptr<Connection> holder, std::string prefix, Millis io_timeout)
      : holder_(holder), session_(std::move(holder), prefix), prefix_(std::move(prefix)), io_timeout_(io_timeout) {}

  Result<sql::Rows> run(const sql::Statement& st, const sql::Params& p, Millis wait) override {
    return session_.run(st, p, wait);
  }
  Result<void> send(const sql::Statement& st, const sql::Params& p, Millis wait) override {
    return session_.send(st, p, wait);
  }
  Result<sql::Rows> answer() override { return session_.answer(); }
  // Sent already: a wait is cut short with the session (the next take opens it anew), an
  // answer that comes at once is read.
  void withdraw(bool waits) override {
    if (waits) holder_->close();
    else (void)session_.answer();
  }
  Result<void> exec(std::string_view sql) override { return session_.exec(sql); }
  // In its own group, in the write of the BEGIN, lock timeout and lock statement that follow
  // (Connection::end_ahead): they run only once it has ended the refused transaction.
  Result<void> rollback_ahead() override { return holder_->end_ahead("ROLLBACK"); }
  // COMMIT in the statement's round trip and its pipeline group: skipped when it failed.
  Result<sql::Rows> run_and_commit(const sql::Statement& st, const sql::Params& p) override {
    holder_->send_in_group_after_next("COMMIT");
    return session_.run(st, p, Millis(0));
  }
  // lock_timeout for the transaction just begun (set_config's is_local): it ends with it. Both
  // go with the lock statement that follows, in its round trip.
  Result<void> begin(const sql::LockStatements& st, const sql::Params& p, Millis) override {
    if (auto ok = holder_->send_ahead(st.begin); !ok) return ok;
    return session_.send_ahead(st.lock_wait, p);
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
  auto session = std::make_shared<Session>(std::move(book), prefix);
  session->set_schema(std::move(schema));  // the tables a statement finds missing are made
  return sql::make_session_locker(s, std::make_unique<PostgresHolder>(std::move(holder), prefix, options.io_timeout),
                                  lock_statements(prefix), std::move(session), lease_statements(prefix), prefix,
                                  options.history_keep, std::move(serving));
}

}  // namespace dblock::postgres

// The server lock of the session strategies (core/sql/session_locker.hpp), in the holder
// session; every other step of them is the common session locker's.
//  advisory    pg_advisory_lock on the key's 64-bit hash (one bigint: objsubid 1), a session
//              lock held outside any transaction, so a plain key's row is numbered in the
//              statement that takes it (take_numbered)
//  for-update  SELECT ... FOR UPDATE on the key's <prefix>claims row, its transaction held open
//  txn-insert  an uncommitted INSERT of the key's claims row, its transaction held open; waiters
//              queue on a transaction-scoped advisory lock of the key (two ints: objsubid 2)
// status and `release --force` judge a recorded holder by these same locks (session_verdict).
#include "backends/postgres/postgres_tables.hpp"
#include "core/sql/session_locker.hpp"

namespace dblock::postgres {
namespace {

// lock_timeout for a server-side wait: 0 would mean "wait forever", so an attempt that must
// not wait waits 1 ms (txn-insert's INSERT may meet a holder that is just ending).
std::string lock_timeout(Millis wait) { return std::to_string(std::max<std::int64_t>(wait.count(), 1)) + "ms"; }

class PostgresSessionLock final : public sql::SessionLock {
 public:
  // `book`: the bookkeeping session, on `holder` itself for advisory.
  PostgresSessionLock(Strategy s, std::shared_ptr<Connection> holder, std::shared_ptr<Session> book, const Tables& t)
      : strategy_(s), kind_(to_string(s)), holder_(std::move(holder)), book_(std::move(book)), prefix_(t.prefix),
        advisory_(advisory_statements(t.prefix)) {
    const std::string claims = t.claims;
    // A waiter for txn-insert queues on the key's transaction-scoped advisory lock ahead of the
    // INSERT, and the holder keeps it until its transaction ends, which wakes the one waiter at
    // the head of that queue; blocked on the unique index instead, every waiter would wake at
    // every release and all but one block again.
    insert_wait_ = "INSERT INTO " + claims +
                   " (name, kind) SELECT $1, $2 FROM (SELECT pg_advisory_xact_lock($3::int, $4::int)) q RETURNING 1";
    insert_try_ = "INSERT INTO " + claims +
                  " (name, kind) SELECT $1, $2 WHERE pg_try_advisory_xact_lock($3::int, $4::int) RETURNING 1";
    lock_row_ = "SELECT 1 FROM " + claims + " WHERE name = $1 AND kind = $2 FOR UPDATE";
    make_row_ = "INSERT INTO " + claims + " (name, kind) VALUES ($1, $2) ON CONFLICT DO NOTHING";
    holds_claim_ = "SELECT count(*) FROM " + claims + " WHERE name = $1 AND kind = $2";
  }

  Result<bool> take(const std::string& key, Millis wait) override {
    if (!holder_->is_open()) return fail(ErrorKind::connection, "the lock session is closed");
    const auto id = static_cast<std::uint64_t>(key_hash(prefix_, key));
    Result<bool> got = false;
    if (strategy_ == Strategy::advisory) {
      // The wait bound as a setting of this statement's own transaction, set ahead of the lock
      // (a subquery with a volatile function is evaluated first, not folded into the query).
      got = answer(wait.count() <= 0
                       ? holder_->exec("SELECT pg_try_advisory_lock($1::bigint)", {std::to_string(key_hash(prefix_, key))})
                       : holder_->exec("SELECT (SELECT true FROM (SELECT pg_advisory_lock($1::bigint)) l) FROM "
                                       "(SELECT set_config('lock_timeout', $2, true)) c",
                                       {std::to_string(key_hash(prefix_, key)), lock_timeout(wait)}, wait));
    } else {
      got = take_in_transaction(key, id, wait);
    }
    // A busy row lock leaves its transaction open (or aborted): it goes.
    if (got && !*got && strategy_ != Strategy::advisory) (void)give_back(key);
    return got;
  }

  Result<bool> holds(const std::string& key) override {
    Result<QueryResult> r = fail(ErrorKind::lost, "");
    if (strategy_ == Strategy::advisory) {
      const auto id = static_cast<std::uint64_t>(key_hash(prefix_, key));
      r = holder_->exec(
          "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid() "
          "AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1",
          {std::to_string(id >> 32), std::to_string(id & 0xffffffffULL)});
    } else {
      // The lock lives as long as its transaction; a txn-insert holder still sees its own row.
      if (!holder_->in_transaction()) return false;
      r = holder_->exec(strategy_ == Strategy::txn_insert ? holds_claim_ : "SELECT 1",
                        strategy_ == Strategy::txn_insert ? Params{key, kind_} : Params{});
    }
    if (!r) {
      holder_->close();  // whatever it held is gone with it
      return std::unexpected(r.error());
    }
    return r->rows() == 1 && r->int64(0, 0) > 0;
  }

  Result<void> give_back(const std::string&) override {
    if (!holder_->is_open()) return fail(ErrorKind::connection, "the lock session is gone");
    Result<QueryResult> r{};
    // This session holds at most one advisory lock (ours), so unlocking all of them never
    // leaves a stacked second hold behind.
    if (strategy_ == Strategy::advisory) r = holder_->exec("SELECT pg_advisory_unlock_all()");
    else if (holder_->transaction_open()) r = holder_->exec("ROLLBACK");
    if (!r) {
      holder_->close();  // closing frees whatever the session held
      return std::unexpected(r.error());
    }
    return {};
  }

  std::string session_id() const override { return std::to_string(holder_->backend_pid()); }
  int socket() const override { return holder_->socket(); }
  Result<void> reopen() override { return holder_->reconnect(); }
  // The server queues waiters itself: nothing to hear.
  sql::ReleaseSignal& release_signal() override { return no_signal_; }

  // A session-level advisory lock is held outside any transaction, by the bookkeeping session.
  bool folds_row() const override { return strategy_ == Strategy::advisory; }

  Result<NumberedTake> take_numbered(const std::string& key, Millis wait, const sql::Params& number) override {
    if (!holder_->is_open()) return fail(ErrorKind::connection, "the lock session is closed");
    sql::Params p = number;
    p.set("lock", std::to_string(key_hash(prefix_, key))).set("lock_timeout", lock_timeout(wait));
    auto r = book_->run(wait.count() <= 0 ? advisory_.take_try : advisory_.take_wait, p, wait);
    if (!r) {
      // A session lock outlives the failed statement that took it, unless the wait for it is
      // what ended (55P03).
      if (r.error().sqlstate != "55P03" && r.error().kind != ErrorKind::connection) (void)give_back(key);
      if (r.error().kind == ErrorKind::busy) return NumberedTake{};
      return std::unexpected(r.error());
    }
    const auto row = (*r)[0];
    NumberedTake out;
    out.taken = row.int64(0) != 0;
    // session.take's own answer follows: its row when it numbered one.
    if (out.taken && !row.is_null(1)) {
      out.numbered.add({row.text(1), row.is_null(2) ? sql::Rows::Cell() : row.text(2), sql::Rows::Cell()});
      out.numbered.affected = 1;
    }
    return out;
  }

 private:
  // for-update and txn-insert: the lock in a fresh transaction, bounded by lock_timeout.
  Result<bool> take_in_transaction(const std::string& key, std::uint64_t id, Millis wait) {
    if (holder_->transaction_open()) (void)holder_->exec("ROLLBACK");
    if (auto r = holder_->exec("BEGIN ISOLATION LEVEL READ COMMITTED"); !r) return std::unexpected(r.error());
    if (auto r = holder_->exec("SELECT set_config('lock_timeout', $1, true)", {lock_timeout(wait)}); !r)
      return std::unexpected(r.error());
    if (strategy_ == Strategy::txn_insert) {
      const Params p{key, kind_, std::to_string(static_cast<std::int32_t>(id >> 32)),
                     std::to_string(static_cast<std::int32_t>(id & 0xffffffffULL))};
      // No row: the try found the queue lock taken.
      return answer(holder_->exec(wait.count() <= 0 ? insert_try_ : insert_wait_, p, wait), /*rows=*/true);
    }
    auto locked = holder_->exec(wait.count() <= 0 ? lock_row_ + " NOWAIT" : lock_row_, {key, kind_}, wait);
    if (locked && locked->rows() == 0) {
      // The key's claims row must exist, committed, before anyone can lock it.
      if (auto r = holder_->exec("ROLLBACK"); !r) return std::unexpected(r.error());
      if (auto r = holder_->exec(make_row_, {key, kind_}); !r) return std::unexpected(r.error());
      return take_in_transaction(key, id, wait);
    }
    return answer(locked, /*rows=*/true);
  }

  // Taken: a true first column (rows: one row). Busy (55P03): false. A failed statement leaves
  // the transaction aborted; take() rolls it back.
  Result<bool> answer(const Result<QueryResult>& r, bool rows = false) {
    if (!r) {
      if (r.error().kind == ErrorKind::busy) return false;
      if (r.error().kind != ErrorKind::connection) (void)give_back("");
      return std::unexpected(r.error());
    }
    if (rows) return r->rows() == 1;
    return r->rows() == 1 && r->text(0, 0) == "t";
  }

  Strategy strategy_;
  std::string kind_;
  std::shared_ptr<Connection> holder_;
  std::shared_ptr<Session> book_;
  std::string prefix_;
  AdvisoryStatements advisory_;
  std::string insert_wait_, insert_try_, lock_row_, make_row_, holds_claim_;
  sql::ReleaseSignal no_signal_;
};

}  // namespace

Result<std::unique_ptr<Locker>> make_session_locker(Strategy s, std::shared_ptr<Connection> holder, const Dsn& dsn,
                                                   const BackendOptions& options, Tables t,
                                                   std::shared_ptr<const sql::SchemaStatements> schema) {
  // advisory's lock is held outside any transaction, so its token and history go through the
  // holder session itself; the others hold a transaction open and number the token on a second,
  // autocommit connection, which a holder killed mid-transaction cannot roll back.
  std::shared_ptr<Connection> book = holder;
  if (s != Strategy::advisory) {
    auto opened = Connection::open(dsn, options, ConnectionRole::bookkeeping);
    if (!opened) return std::unexpected(opened.error());
    book = std::move(*opened);
  }
  auto session = std::make_shared<Session>(std::move(book), t.prefix);
  session->set_schema(std::move(schema));  // the tables a statement finds missing are made
  auto lock = std::make_unique<PostgresSessionLock>(s, std::move(holder), session, t);
  return sql::make_session_locker(s, std::move(lock), std::move(session), lease_statements(t.prefix), t.prefix,
                                  options.history_keep);
}

}  // namespace dblock::postgres

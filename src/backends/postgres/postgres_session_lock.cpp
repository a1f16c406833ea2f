// The server lock of the session strategies (core/sql/session_locker.hpp), in the holder
// session, with the statements of lock_statements (postgres_statements.cpp):
//  advisory    pg_advisory_lock on the key's 64-bit hash, a session lock held outside any
//              transaction, so a plain key's row is numbered in the statement that takes it
//  for-update  SELECT ... FOR UPDATE on the key's <prefix>claims row, its transaction held open
//  txn-insert  an uncommitted INSERT of the key's claims row, its transaction held open
// status and `release --force` judge a recorded holder by these same locks (session_holds).
#include "backends/postgres/postgres_tables.hpp"
#include "core/sql/session_locker.hpp"

namespace dblock::postgres {
namespace {

class PostgresSessionLock final : public sql::SessionLock {
 public:
  // `book`: the bookkeeping session, on `holder` itself for advisory.
  PostgresSessionLock(Strategy s, std::shared_ptr<Connection> holder, std::shared_ptr<Session> book,
                      const std::string& prefix)
      : strategy_(s), kind_(to_string(s)), holder_(holder), lock_(std::move(holder), prefix), book_(std::move(book)),
        prefix_(prefix), s_(lock_statements(prefix)) {}

  Result<bool> take(const std::string& key, Millis wait) override {
    if (!holder_->is_open()) return gone();
    Result<bool> got = false;
    if (strategy_ == Strategy::advisory)
      got = answer(lock_.run(wait.count() <= 0 ? s_.advisory_try : s_.advisory_wait, params(key, wait), wait));
    else
      got = take_in_transaction(key, wait);
    // A busy row lock leaves its transaction open (or aborted): it goes.
    if (got && !*got && strategy_ != Strategy::advisory) (void)give_back(key);
    return got;
  }

  Result<bool> holds(const std::string& key) override {
    // A row lock lives as long as its transaction; a txn-insert holder still sees its own row.
    if (strategy_ != Strategy::advisory && !holder_->in_transaction()) return false;
    const sql::Statement& proof = strategy_ == Strategy::advisory     ? s_.advisory_holds
                                  : strategy_ == Strategy::txn_insert ? s_.holds_claim
                                                                      : s_.alive;
    auto r = lock_.run(proof, params(key, Millis(0)));
    if (!r) {
      holder_->close();  // whatever it held is gone with it
      return std::unexpected(r.error());
    }
    return r->size() == 1 && (*r)[0].int64(0) > 0;
  }

  Result<void> give_back(const std::string& key) override {
    if (!holder_->is_open()) return gone();
    Result<void> r{};
    if (strategy_ == Strategy::advisory) {
      // Not ours: this session is not the one that took it (the bookkeeping statements share
      // it, and a reconnect there replaced it), so the lock was not held to the end.
      auto unlocked = lock_.run(s_.advisory_give_back, params(key, Millis(0)));
      if (unlocked && !(unlocked->size() == 1 && (*unlocked)[0].int64(0) != 0))
        return fail(ErrorKind::lost, "the advisory lock was not held by this session");
      if (!unlocked) r = std::unexpected(unlocked.error());
    } else if (holder_->transaction_open()) {
      r = lock_.exec("ROLLBACK");
    }
    if (!r) holder_->close();  // closing frees whatever the session held
    return r;
  }

  std::string session_id() const override { return std::to_string(holder_->backend_pid()); }
  int socket() const override { return holder_->socket(); }
  Result<void> reopen() override { return holder_->reconnect(); }
  // The server queues waiters itself: nothing to hear.
  sql::ReleaseSignal& release_signal() override { return no_signal_; }

  bool folds_row() const override { return strategy_ == Strategy::advisory; }

  Result<NumberedTake> take_numbered(const std::string& key, Millis wait, const sql::Params& number) override {
    if (!holder_->is_open()) return gone();
    sql::Params p = number;
    p.set("lock", key_hash(prefix_, key)).set("lock_timeout", lock_timeout(wait));
    auto r = book_->run(wait.count() <= 0 ? s_.advisory_numbered_try : s_.advisory_numbered_wait, p, wait);
    if (!r) {
      // A session lock outlives the failed statement that took it, unless the wait for it is
      // what ended (55P03).
      if (r.error().sqlstate != "55P03" && r.error().kind != ErrorKind::connection) (void)give_back(key);
      if (r.error().kind == ErrorKind::busy) return NumberedTake{};
      return std::unexpected(r.error());
    }
    // One row: session.take's columns (NULL when it numbered nothing), then whether the lock was taken.
    const bool taken = (*r)[0].int64(3) != 0;
    r->affected = taken && !(*r)[0].is_null(0);
    return NumberedTake{taken, std::move(*r)};
  }

 private:
  static std::unexpected<Error> gone() { return fail(ErrorKind::connection, "the lock session is closed"); }

  // lock_timeout for a server-side wait: 0 would mean "wait forever", so an attempt that must
  // not wait waits 1 ms (txn-insert's INSERT may meet a holder that is just ending).
  static std::string lock_timeout(Millis wait) { return std::to_string(std::max<std::int64_t>(wait.count(), 1)) + "ms"; }

  sql::Params params(const std::string& key, Millis wait) const {
    const std::int64_t id = key_hash(prefix_, key);
    const auto bits = static_cast<std::uint64_t>(id);
    return {{"key", key},
            {"kind", kind_},
            {"lock", id},
            {"hi", std::int64_t{static_cast<std::int32_t>(bits >> 32)}},
            {"lo", std::int64_t{static_cast<std::int32_t>(bits & 0xffffffffULL)}},
            {"lock_timeout", lock_timeout(wait)}};
  }

  // for-update and txn-insert: the lock in a fresh transaction, bounded by lock_timeout.
  Result<bool> take_in_transaction(const std::string& key, Millis wait) {
    if (holder_->transaction_open()) (void)lock_.exec("ROLLBACK");
    if (auto r = lock_.exec("BEGIN ISOLATION LEVEL READ COMMITTED"); !r) return std::unexpected(r.error());
    const sql::Params p = params(key, wait);
    if (auto r = lock_.run(s_.lock_timeout, p); !r) return std::unexpected(r.error());
    // No row from txn-insert: the try found the queue lock taken.
    if (strategy_ == Strategy::txn_insert)
      return answer(lock_.run(wait.count() <= 0 ? s_.insert_claim_try : s_.insert_claim, p, wait));
    auto locked = lock_.run(wait.count() <= 0 ? s_.lock_claim_nowait : s_.lock_claim, p, wait);
    if (locked && locked->empty()) {
      // The key's claims row must exist, committed, before anyone can lock it.
      if (auto r = lock_.exec("ROLLBACK"); !r) return std::unexpected(r.error());
      if (auto r = lock_.run(s_.make_claim, p); !r) return std::unexpected(r.error());
      return take_in_transaction(key, wait);
    }
    return answer(locked);
  }

  // Taken: a row whose first column is true. Busy (55P03): false. A failed statement leaves
  // the transaction aborted; take() rolls it back.
  Result<bool> answer(const Result<sql::Rows>& r) {
    if (!r) {
      if (r.error().kind == ErrorKind::busy) return false;
      if (r.error().kind != ErrorKind::connection) (void)give_back("");
      return std::unexpected(r.error());
    }
    return r->size() == 1 && (*r)[0].int64(0) != 0;
  }

  Strategy strategy_;
  std::string kind_;
  std::shared_ptr<Connection> holder_;
  Session lock_;  // on holder_
  std::shared_ptr<Session> book_;
  std::string prefix_;
  LockStatements s_;
  sql::ReleaseSignal no_signal_;
};

}  // namespace

Result<std::unique_ptr<Locker>> make_session_locker(Strategy s, std::shared_ptr<Connection> holder, const Dsn& dsn,
                                                   const BackendOptions& options,
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
  const std::string& prefix = options.table_prefix;
  auto session = std::make_shared<Session>(std::move(book), prefix);
  session->set_schema(std::move(schema));  // the tables a statement finds missing are made
  auto lock = std::make_unique<PostgresSessionLock>(s, std::move(holder), session, prefix);
  return sql::make_session_locker(s, std::move(lock), std::move(session), lease_statements(prefix), prefix,
                                  options.history_keep);
}

}  // namespace dblock::postgres

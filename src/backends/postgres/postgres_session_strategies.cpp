// advisory, for-update and txn-insert: the server lock lives in a dedicated holder session;
// the token and holder columns are written on a second, autocommit connection so a holder
// killed mid-transaction cannot roll its token back (README: never reused).
#include <cinttypes>

#include "backends/postgres/postgres_tables.hpp"

namespace dblock::postgres {
namespace {

// lock_timeout for a server-side wait. 0 would mean "wait forever", so a nonblocking
// txn-insert waits 1 ms: enough to see the other holder's row, a busy answer well under 10 ms.
std::string lock_timeout_ms(Millis wait) { return std::to_string(std::max<std::int64_t>(wait.count(), 1)) + "ms"; }

class SessionLocker final : public Locker {
 public:
  SessionLocker(Strategy s, std::shared_ptr<Connection> book, std::unique_ptr<Connection> holder, Tables t, int keep)
      : strategy_(s), book_(std::move(book)), holder_(std::move(holder)), t_(std::move(t)), keep_(keep) {
    book_sql_ =
        "INSERT INTO " + t_.locks + " AS l (name, owner, host, pid, token, strategy, session_id, acquired_at, "
        "renewed_at, expires_at, released_at, last_started_at) "
        "VALUES ($1, $2, $3, $4::bigint, 1, $5, $6, now(), now(), NULL, NULL, now()) "
        "ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, host = EXCLUDED.host, pid = EXCLUDED.pid, "
        "token = l.token + 1, strategy = EXCLUDED.strategy, session_id = EXCLUDED.session_id, acquired_at = now(), "
        "renewed_at = now(), expires_at = NULL, released_at = NULL, last_started_at = now() "
        "WHERE $7::bigint = 0 OR l.last_started_at IS NULL OR l.last_started_at <= now() - $7::bigint * interval '1 ms' "
        "RETURNING token, " + ms("acquired_at");
    due_sql_ = "SELECT GREATEST(0, " + ms("last_started_at + $2::bigint * interval '1 ms'") + " - " + ms("now()") +
               ") FROM " + t_.locks + " WHERE name = $1";
    release_sql_ = "WITH u AS (UPDATE " + t_.locks +
                   " SET released_at = now(), "
                   "last_finished_at = CASE WHEN $3::boolean THEN now() ELSE last_finished_at END, "
                   "last_exit_code = CASE WHEN $3::boolean THEN $4::int ELSE last_exit_code END "
                   "WHERE name = $1 AND token = $2::bigint AND released_at IS NULL RETURNING name) "
                   "SELECT pg_notify($5, u.name)::text FROM u";
    claim_sql_ = "INSERT INTO " + t_.claims + " (name, kind) VALUES ($1, $2) ON CONFLICT DO NOTHING";
    lock_row_sql_ = "SELECT 1 FROM " + t_.claims + " WHERE name = $1 AND kind = $2 FOR UPDATE";
    insert_claim_sql_ = "INSERT INTO " + t_.claims + " (name, kind) VALUES ($1, $2)";
    holder_sql_ = "SELECT owner, host, pid, token, strategy, " + ms("acquired_at") + ", " + ms("now()") + " FROM " +
                  t_.locks + " WHERE name = $1";
  }

  ~SessionLocker() override {
    // Give the server lock back before the connection closes: the server frees a dropped
    // session's locks only once it has processed the disconnect, and status must not lag.
    if (token_) drop_server_lock();
  }

  int session_fd() const override { return token_ ? holder_->socket() : -1; }

  Result<AcquireOutcome> try_acquire(const LockRequest& req, Millis wait) override {
    if (token_) return fail(ErrorKind::internal, "this locker already holds a lock");
    // Nothing is held yet, so a holder session that is gone (the server's idle limit passed
    // while a waiter slept until --min-interval was due) is simply replaced, once.
    if (!holder_->is_open())
      if (auto ok = holder_->reconnect(); !ok) return std::unexpected(ok.error());
    // The bookkeeping connection is autocommit and holds nothing: reconnecting it is safe.
    if (!book_->is_open())
      if (auto ok = book_->reconnect(); !ok) return std::unexpected(ok.error());
    auto got = take_server_lock(req.key, wait);
    if (!got && got.error().kind == ErrorKind::connection && !holder_->is_open()) {
      if (auto ok = holder_->reconnect(); !ok) return std::unexpected(ok.error());
      got = take_server_lock(req.key, wait);
    }
    if (!got) return std::unexpected(got.error());
    AcquireOutcome out;
    if (!*got) {  // busy: say who holds it, for -v (the row is bookkeeping, best effort)
      out.holder = read_holder(req.key);
      return out;
    }
    auto r = book_->exec(book_sql_, {req.key, req.owner, req.host, std::to_string(req.pid), std::string(to_string(strategy_)),
                                     std::to_string(holder_->backend_pid()), ms_param(req.min_interval)});
    if (!r) {
      drop_server_lock();
      return std::unexpected(r.error());
    }
    if (r->rows() == 0) {
      drop_server_lock();
      out.state = AcquireOutcome::State::not_due;
      auto due = book_->exec(due_sql_, {req.key, ms_param(req.min_interval)});
      if (due && due->rows() == 1 && !due->is_null(0, 0)) out.due_in = Millis(due->int64(0, 0));
      return out;
    }
    out.state = AcquireOutcome::State::acquired;
    out.token = r->int64(0, 0);
    out.acquired_at_ms = r->opt_int64(0, 1);
    key_ = req.key;
    held_req_ = req;
    token_ = out.token;
    return out;
  }

  Result<void> renew(Millis) override {
    if (!token_) return fail(ErrorKind::internal, "renew without a held lock");
    // Prove the session still holds the lock; a dropped session is never replaced.
    Result<QueryResult> r = fail(ErrorKind::lost, "");
    if (strategy_ == Strategy::advisory) {
      auto id = static_cast<std::uint64_t>(advisory_key(t_.prefix, key_));
      r = holder_->exec(
          "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid() "
          "AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1",
          {std::to_string(id >> 32), std::to_string(id & 0xffffffffULL)});
    } else {
      r = holder_->exec("SELECT 1");
    }
    bool holds = r && r->rows() == 1 && r->int64(0, 0) > 0 &&
                 (strategy_ == Strategy::advisory || holder_->in_transaction());
    if (!holds) {
      holder_->close();
      std::string why = r ? "the server no longer shows the lock" : r.error().message;
      return fail(ErrorKind::lost, "lock on '" + key_ + "' is gone: " + why);
    }
    return {};
  }

  Result<void> release(const ReleaseRequest& req) override {
    if (!token_) return fail(ErrorKind::internal, "release without a held lock");
    const std::int64_t token = *token_;
    Result<void> result;
    if (!book_->is_open()) (void)book_->reconnect();
    auto r = book_->exec(release_sql_, {key_, std::to_string(*token_), req.finished_run ? "true" : "false",
                                        req.exit_code ? Param(std::to_string(*req.exit_code)) : Param(),
                                        release_channel(t_.prefix, key_)});
    if (!r)
      result = std::unexpected(r.error());
    else if (r->rows() == 0)
      result = fail(ErrorKind::lost, "lock on '" + key_ + "' was taken over or released by someone else before release");
    if (r && req.history)
      if (auto h = insert_history(*book_, t_, complete_run(*req.history, held_req_, token, strategy_, r->rows() != 0), keep_); !h && result) result = h;
    drop_server_lock();
    token_.reset();
    return result;
  }

 private:
  std::optional<LockStatus> read_holder(const std::string& key) {
    auto r = book_->exec(holder_sql_, {key});
    if (!r || r->rows() != 1) return std::nullopt;
    LockStatus h;
    h.key = key;
    h.state = LockStatus::State::held;
    h.owner = r->text(0, 0);
    h.host = r->text(0, 1);
    h.pid = r->opt_int64(0, 2).value_or(0);
    h.token = r->int64(0, 3);
    h.strategy = r->text(0, 4);
    h.acquired_at_ms = r->opt_int64(0, 5);
    h.db_now_ms = r->int64(0, 6);
    return h;
  }

  // One attempt at the server lock: true = taken, false = busy.
  Result<bool> take_server_lock(const std::string& key, Millis wait) {
    const std::string kind(to_string(strategy_));
    if (strategy_ == Strategy::advisory) {
      const std::string id = std::to_string(advisory_key(t_.prefix, key));
      if (wait.count() <= 0) {
        auto r = holder_->exec("SELECT pg_try_advisory_lock($1::bigint)", {id});
        if (!r) return std::unexpected(r.error());
        return r->boolean(0, 0);
      }
      if (auto r = holder_->exec("SET lock_timeout = '" + lock_timeout_ms(wait) + "'"); !r) return std::unexpected(r.error());
      auto r = holder_->exec("SELECT pg_advisory_lock($1::bigint)", {id}, wait);
      return busy_or(r);
    }
    if (strategy_ == Strategy::for_update && claimed_ != key) {
      // The row must exist (committed) before anyone can lock it.
      if (auto r = book_->exec(claim_sql_, {key, kind}); !r) return std::unexpected(r.error());
      claimed_ = key;
    }
    std::string begin = "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '" + lock_timeout_ms(wait) + "'";
    if (auto r = holder_->exec(begin); !r) return std::unexpected(r.error());
    Result<QueryResult> r = strategy_ == Strategy::for_update
                             ? holder_->exec(lock_row_sql_ + (wait.count() <= 0 ? " NOWAIT" : ""), {key, kind}, wait)
                             : holder_->exec(insert_claim_sql_, {key, kind}, wait);
    auto got = busy_or(r);
    if (!got || !*got || (strategy_ == Strategy::for_update && r->rows() != 1)) {
      (void)holder_->exec("ROLLBACK");
      if (got && *got) return fail(ErrorKind::other, "the claims row of '" + key + "' vanished");
      return got;
    }
    return true;
  }

  // busy (55P03 and friends) is an answer, not an error.
  static Result<bool> busy_or(const Result<QueryResult>& r) {
    if (r) return true;
    if (r.error().kind == ErrorKind::busy) return false;
    return std::unexpected(r.error());
  }

  void drop_server_lock() {
    if (!holder_->is_open()) return;
    if (strategy_ == Strategy::advisory) {
      // This session holds at most one advisory lock (ours), so unlocking all of them is
      // pg_advisory_unlock(id) without the risk of a stacked second hold staying behind.
      auto r = holder_->exec("SELECT pg_advisory_unlock_all()");
      if (!r) holder_->close();  // closing frees whatever the session held
    } else {
      auto r = holder_->exec("ROLLBACK");
      if (!r) holder_->close();
    }
  }

  Strategy strategy_;
  std::shared_ptr<Connection> book_;
  std::unique_ptr<Connection> holder_;
  Tables t_;
  int keep_;
  std::string book_sql_, due_sql_, release_sql_, claim_sql_, lock_row_sql_, insert_claim_sql_, holder_sql_;
  std::string key_, claimed_;
  std::optional<std::int64_t> token_;
  LockRequest held_req_;
};

}  // namespace

Result<std::unique_ptr<Locker>> make_session_locker(Strategy s, std::shared_ptr<Connection> book, const Dsn& dsn,
                                                   const BackendOptions& options, Tables t) {
  auto holder = Connection::open(dsn, options, ConnectionRole::lock_holder);
  if (!holder) return std::unexpected(holder.error());
  return std::unique_ptr<Locker>(
      std::make_unique<SessionLocker>(s, std::move(book), std::move(*holder), std::move(t), options.history_keep));
}

}  // namespace dblock::postgres

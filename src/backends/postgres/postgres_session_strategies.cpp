// advisory, for-update and txn-insert. The server lock lives in the holder session (the
// backend's own connection, taken over). The token bump must commit on its own, so that a
// holder killed mid-transaction cannot roll it back (README: never reused): advisory holds a
// session-level lock outside any transaction, so one statement on the holder session takes the
// lock and bumps the token; for-update and txn-insert hold their lock in an open transaction
// and bump the token on a second, autocommit connection. The release always runs in the
// holder session, ahead of letting the lock go, in one round trip.
#include <cinttypes>

#include "backends/postgres/postgres_tables.hpp"
#include "core/semaphore.hpp"

namespace dblock::postgres {
namespace {

// lock_timeout for a server-side wait. 0 would mean "wait forever", so a nonblocking
// txn-insert waits 1 ms: enough to see the other holder's row, a busy answer well under 10 ms.
std::string lock_timeout_ms(Millis wait) { return std::to_string(std::max<std::int64_t>(wait.count(), 1)) + "ms"; }

// --min-interval ($7 ms) allows a new start of the row (`row` qualifies its columns).
std::string due(std::string_view row) {
  const std::string started = std::string(row) + "last_started_at";
  return "($7::bigint = 0 OR " + started + " IS NULL OR " + started + " <= now() - $7::bigint * interval '1 ms')";
}

// The token upsert: taken (token bumped, holder columns written) unless --min-interval says
// not yet. A plain lock never takes a semaphore's header row (its server lock excludes only
// other plain holders). A semaphore's slot takes the header's token instead (`FROM h`, CTE
// of semaphore_header_ctes). $1 key, $2 owner, $3 host, $4 pid, $5 strategy, $6 session id,
// $7 min interval.
std::string upsert_sql(const Tables& t, std::string_view from_where, bool slot = false) {
  return "INSERT INTO " + t.locks + " AS l (name, owner, host, pid, token, strategy, session_id, acquired_at, "
         "renewed_at, expires_at, released_at, last_started_at) "
         "SELECT $1, $2, $3, $4::bigint, " + (slot ? "h.token" : "1") + ", $5, $6, now(), now(), NULL, NULL, now() " +
         std::string(slot ? "FROM h" : from_where) +
         " ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, host = EXCLUDED.host, pid = EXCLUDED.pid, "
         "token = " + (slot ? "EXCLUDED.token" : "l.token + 1") + ", strategy = EXCLUDED.strategy, "
         "session_id = EXCLUDED.session_id, acquired_at = now(), "
         "renewed_at = now(), expires_at = NULL, released_at = NULL, last_started_at = now() "
         "WHERE " + due("l.") + (slot ? "" : " AND (l.strategy IS NULL OR l.strategy <> 'semaphore')") +
         " RETURNING token, " + ms("acquired_at") + " AS acq";
}

// What a busy or not-due answer reports, from the row as it was: holder columns, db now, the
// time until due, and the row's name. Appended to an outcome; `l` is the locks row.
std::string holder_columns(std::string_view min_interval = "$7") {
  return "l.owner, l.host, l.pid, l.token, l.strategy, " + ms("l.acquired_at") + ", " + ms("now()") + ", GREATEST(0, " +
         ms("l.last_started_at + " + std::string(min_interval) + "::bigint * interval '1 ms'") + " - " + ms("now()") +
         "), l.name";
}

class SessionLocker final : public Locker {
 public:
  SessionLocker(Strategy s, std::shared_ptr<Connection> holder, std::unique_ptr<Connection> book, Tables t, int keep)
      : strategy_(s), holder_(std::move(holder)), book_(std::move(book)), t_(std::move(t)), keep_(keep) {
    // advisory, one statement: the lock ($8), then the upsert only when it was taken; a taken
    // lock the upsert did not use (--min-interval) is let go at once. Columns: got, token,
    // acquired_at, then the holder's columns when not taken.
    auto advisory = [&](std::string_view lock) {
      return "WITH g AS (SELECT " + std::string(lock) + " AS got), a AS (" + upsert_sql(t_, "FROM g WHERE g.got") +
             ") SELECT g.got, a.token, a.acq, CASE WHEN g.got AND a.token IS NULL THEN pg_advisory_unlock($8::bigint) END, " +
             holder_columns() + " FROM g LEFT JOIN a ON true LEFT JOIN " + t_.locks +
             " l ON a.token IS NULL AND l.name = $1";
    };
    try_lock_sql_ = advisory("pg_try_advisory_lock($8::bigint)");
    wait_lock_sql_ = advisory("(SELECT true FROM (SELECT pg_advisory_lock($8::bigint)) x)");
    book_sql_ = "WITH a AS (" + upsert_sql(t_, "") + ") SELECT true, a.token, a.acq, NULL::boolean, " + holder_columns() +
                " FROM (SELECT 1) one LEFT JOIN a ON true LEFT JOIN " + t_.locks + " l ON a.token IS NULL AND l.name = $1";
    // A semaphore's slot (src/backends/README.md, Semaphores): the same statements, with the
    // header K (from $first on) taken ahead of the slot's row, which gets the header's token.
    // The slot's server lock ($8, g) is held first, so its row is free unless --min-interval
    // says not yet. Not taken: the row that refused (the header, or the slot), with the header's
    // recorded count.
    auto slot = [&](std::string_view lead, std::string_view got, std::string_view unlock, int first) {
      const std::string slot_free =
          std::string(got) + " AND NOT EXISTS (SELECT 1 FROM " + t_.locks + " WHERE name = $1 AND NOT " + due("") + ")";
      return "WITH " + std::string(lead) + semaphore_header_ctes(t_, slot_free, first) + "a AS (" +
             upsert_sql(t_, "", /*slot=*/true) + ") SELECT " + std::string(got) + ", a.token, a.acq, " +
             std::string(unlock) + ", " + holder_columns() + ", l.slots, " + std::string(semaphore_guard) +
             " FROM f LEFT JOIN h ON true LEFT JOIN a ON true LEFT JOIN " + t_.locks +
             " l ON a.token IS NULL AND l.name = " + semaphore_refuser(first);
    };
    auto advisory_slot = [&](std::string_view lock) {
      return slot("g AS (SELECT " + std::string(lock) + " AS got), ", "(SELECT got FROM g)",
                  "CASE WHEN (SELECT got FROM g) AND a.token IS NULL THEN pg_advisory_unlock($8::bigint) END", 9);
    };
    try_slot_sql_ = advisory_slot("pg_try_advisory_lock($8::bigint)");
    wait_slot_sql_ = advisory_slot("(SELECT true FROM (SELECT pg_advisory_lock($8::bigint)) x)");
    book_slot_sql_ = slot("", "true", "NULL::boolean", 8);
    lock_row_sql_ = "SELECT 1 FROM " + t_.claims + " WHERE name = $1 AND kind = $2 FOR UPDATE";
    // txn-insert waiters queue on a transaction-scoped advisory lock of the key ($3, $4: its
    // two halves, the two-int form, apart from the advisory strategy's one-bigint locks) before
    // the INSERT, and the holder keeps it until its COMMIT. A commit then wakes the one waiter
    // at the head of that queue; blocked on the unique index, every waiter would wake at every
    // commit (each waits for the holder's transaction) and all but one block again. An attempt
    // that does not wait takes it only if free: taken, the key is being handed over.
    insert_claim_sql_ = "INSERT INTO " + t_.claims +
                        " (name, kind) SELECT $1, $2 FROM (SELECT pg_advisory_xact_lock($3::int, $4::int)) q RETURNING 1";
    try_insert_claim_sql_ = "INSERT INTO " + t_.claims +
                            " (name, kind) SELECT $1, $2 WHERE pg_try_advisory_xact_lock($3::int, $4::int) RETURNING 1";
    claim_sql_ = "INSERT INTO " + t_.claims + " (name, kind) VALUES ($1, $2) ON CONFLICT DO NOTHING";
    holder_sql_ = "SELECT false, NULL::bigint, NULL::bigint, NULL::boolean, " + holder_columns("$2") + " FROM " +
                  t_.locks + " l WHERE l.name = $1";
    // The release, checked on the token. advisory lets the session lock go in the same
    // statement, after the row is updated and locked: a waiter that gets the lock then waits
    // for this row until the commit, so it never sees the row unreleased.
    // statement_timestamp(), not now(): in the holding transaction now() is its BEGIN.
    release_sql_ = "WITH u AS (UPDATE " + t_.locks +
                   " SET released_at = statement_timestamp(), "
                   "last_finished_at = CASE WHEN $3::boolean THEN statement_timestamp() ELSE last_finished_at END, "
                   "last_exit_code = CASE WHEN $3::boolean THEN $4::int ELSE last_exit_code END "
                   "WHERE name = $1 AND token = $2::bigint AND released_at IS NULL RETURNING name)" +
                   release_tail(t_, s == Strategy::advisory ? "pg_advisory_unlock_all()::text" : "", 5);
    // txn-insert's claim row goes with the commit that ends the holding transaction, so it
    // never becomes visible; for-update's row lock goes with it.
    end_txn_sql_ = strategy_ == Strategy::txn_insert ? "DELETE FROM " + t_.claims + " WHERE name = $1 AND kind = $2" : "";
  }

  ~SessionLocker() override {
    // Give the server lock back before the connection closes: the server frees a dropped
    // session's locks only once it has processed the disconnect, and status must not lag.
    if (token_) drop_server_lock();
  }

  int session_fd() const override { return token_ ? holder_->socket() : -1; }

  // The bookkeeping connection committed the token and holds nothing while the command runs:
  // renew and release go to the holder session, and a release after that session died opens
  // it again (bookkeeping()). Closed now, the holder keeps one connection for the rest of the
  // job, and the server ends its process now rather than at the handoff.
  void drop_spares() override {
    if (token_ && book_ && book_->is_open()) book_->close();
  }

  Result<AcquireOutcome> try_acquire(const LockRequest& req, Millis wait) override {
    if (token_) return fail(ErrorKind::internal, "this locker already holds a lock");
    // Nothing is held yet, so a holder session that is gone (the server's idle limit passed
    // while a waiter slept until --min-interval was due) is simply replaced, once.
    if (!holder_->is_open())
      if (auto ok = holder_->reconnect(); !ok) return std::unexpected(ok.error());
    auto got = with_schema(bookkeeping(), t_, [&] { return attempt(req, wait); });
    if (!got && got.error().kind == ErrorKind::connection && !holder_->is_open()) {
      if (auto ok = holder_->reconnect(); !ok) return std::unexpected(ok.error());
      got = with_schema(bookkeeping(), t_, [&] { return attempt(req, wait); });
    }
    if (!got) return std::unexpected(got.error());
    if (got->state == AcquireOutcome::State::acquired) {
      key_ = req.key;
      held_req_ = req;
      token_ = got->token;
    }
    return got;
  }

  Result<void> renew(Millis) override {
    if (!token_) return fail(ErrorKind::internal, "renew without a held lock");
    // Prove the session still holds the lock; a dropped session is never replaced.
    Result<QueryResult> r = fail(ErrorKind::lost, "");
    if (strategy_ == Strategy::advisory) {
      auto id = static_cast<std::uint64_t>(key_hash(t_.prefix, key_));
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

  // One round trip in the holder session: release, history and trim, then the lock goes
  // (advisory: in the same statement; the others: COMMIT ends the holding transaction).
  Result<void> release(const ReleaseRequest& req) override {
    if (!token_) return fail(ErrorKind::internal, "release without a held lock");
    const std::int64_t token = *token_;
    token_.reset();
    Params p{key_, std::to_string(token), req.finished_run ? "true" : "false",
             req.exit_code ? Param(std::to_string(*req.exit_code)) : Param()};
    append_history_params(p, req, held_req_, token, strategy_, keep_);
    Result<QueryResult> r = fail(ErrorKind::connection, "the holder session is gone");
    if (holder_->is_open()) {
      std::vector<Statement> batch{{.sql = release_sql_, .params = p, .prepared = true}};
      if (!end_txn_sql_.empty())
        batch.push_back({.sql = end_txn_sql_, .params = {key_, std::string(to_string(strategy_))}, .prepared = true});
      if (strategy_ != Strategy::advisory) batch.push_back({"COMMIT", {}});
      auto all = holder_->pipeline(batch);
      if (all) r = all->front();
      else r = std::unexpected(all.error());
      if (!all) drop_server_lock();
    }
    const bool table_missing = !r && (r.error().sqlstate == "42P01" || r.error().sqlstate == "42703");
    if (!r && (r.error().kind == ErrorKind::connection || table_missing)) {
      // The holder session died (the run knows the lock was lost), or the history table went
      // missing under it: the run is still recorded, on its own, the lock already let go.
      if (!table_missing) holder_->close();
      Connection& other = bookkeeping();
      if (!other.is_open()) (void)other.reconnect();
      r = with_schema(other, t_, [&] { return other.exec(release_sql_, p); });
    }
    if (!r) return std::unexpected(r.error());
    if (r->int64(0, 0) != 1)
      return fail(ErrorKind::lost, "lock on '" + key_ + "' was taken over or released by someone else before release");
    return {};
  }

 private:
  // The connection for the token bookkeeping and the schema: advisory's one, or the second.
  Connection& bookkeeping() {
    if (book_) {
      if (!book_->is_open()) (void)book_->reconnect();  // autocommit and holds nothing: safe
      return *book_;
    }
    return *holder_;
  }

  // One attempt; cleans up after itself on failure (no lock left behind, no transaction open).
  Result<AcquireOutcome> attempt(const LockRequest& req, Millis wait) {
    const std::string kind(to_string(strategy_));
    Params p{req.key, req.owner, req.host, std::to_string(req.pid), kind, std::to_string(holder_->backend_pid()),
             ms_param(req.min_interval)};
    const bool slot = !req.semaphore.empty();
    if (strategy_ == Strategy::advisory) {
      p.push_back(std::to_string(key_hash(t_.prefix, req.key)));
      if (slot) append_semaphore_params(p, req);
      // The release is planned here first (a warm-up, once per session), ahead of the lock, in
      // the same round trip: at the handoff its catalog lookups are done. Its own Sync lets its
      // table locks go before the lock statement waits.
      std::vector<Statement> batch{release_warm_up(req)};
      if (wait.count() > 0)  // the wait bound applies to this transaction only
        batch.push_back({"SELECT set_config('lock_timeout', $1, true)", {lock_timeout_ms(wait)}});
      batch.push_back({wait.count() <= 0 ? (slot ? try_slot_sql_ : try_lock_sql_) : (slot ? wait_slot_sql_ : wait_lock_sql_), p});
      auto r = holder_->pipeline(batch, wait);
      if (!r) {
        // A session lock outlives the failed statement that took it.
        if (r.error().kind != ErrorKind::busy) drop_server_lock();
        return busy_or(r.error());
      }
      return outcome(r->back(), req);
    }
    // for-update / txn-insert: the lock in a fresh transaction (a failed attempt's is rolled
    // back in the same round trip), then the token on the bookkeeping connection. A waiter has
    // the token statement planned first (a warm-up), so the handoff does not wait for its
    // catalog lookups.
    if (slot) append_semaphore_params(p, req);
    if (wait.count() > 0) {
      const Statement plan[] = {{.sql = slot ? book_slot_sql_ : book_sql_, .params = p, .warm_up = true, .prepared = true}};
      if (auto ok = bookkeeping().pipeline(plan); !ok) return std::unexpected(ok.error());
    }
    std::vector<Statement> batch;
    if (holder_->transaction_open()) batch.push_back({"ROLLBACK", {}});
    // The release is planned ahead too, in the same round trip but in a transaction of its own
    // (its Sync): planned inside the holding transaction, it would keep its tables' locks for
    // the whole job.
    batch.push_back(release_warm_up(req));
    if (!end_txn_sql_.empty())
      batch.push_back({.sql = end_txn_sql_, .params = {req.key, kind}, .warm_up = true, .sync_after = true, .prepared = true});
    batch.push_back({"BEGIN ISOLATION LEVEL READ COMMITTED", {}});
    batch.push_back({"SELECT set_config('lock_timeout', $1, true)", {lock_timeout_ms(wait)}});
    if (strategy_ == Strategy::for_update)
      batch.push_back({wait.count() <= 0 ? lock_row_sql_ + " NOWAIT" : lock_row_sql_, {req.key, kind}});
    else
      batch.push_back({wait.count() <= 0 ? try_insert_claim_sql_ : insert_claim_sql_, claim_queue_params(req.key, kind)});
    auto r = holder_->pipeline(batch, wait);
    // Not taken: the lock was busy (55P03), or txn-insert's queue lock was taken (no row).
    const bool queue_taken = r && strategy_ == Strategy::txn_insert && r->back().rows() != 1;
    if (!r || queue_taken) {
      if (queue_taken || r.error().kind != ErrorKind::busy) drop_server_lock();
      auto busy = queue_taken ? Result<AcquireOutcome>(AcquireOutcome{}) : busy_or(r.error());
      if (busy && wait.count() <= 0) busy->holder = read_holder(req);  // for -v: who has it
      return busy;
    }
    if (strategy_ == Strategy::for_update && r->back().rows() != 1) {
      // The key's claims row does not exist yet: it must, committed, before anyone can lock it.
      drop_server_lock();
      if (auto c = bookkeeping().exec(claim_sql_, {req.key, kind}); !c) return std::unexpected(c.error());
      return attempt(req, wait);
    }
    const Statement book[] = {{.sql = slot ? book_slot_sql_ : book_sql_, .params = p, .prepared = true}};
    auto b = bookkeeping().pipeline(book);
    if (!b) {
      drop_server_lock();
      if (slot_taken_meanwhile(b.error())) return AcquireOutcome{};  // busy, nothing changed
      return std::unexpected(b.error());
    }
    auto out = outcome(b->front(), req);
    if (out && out->state != AcquireOutcome::State::acquired) drop_server_lock();
    return out;
  }

  // txn-insert's claim: key, strategy, then the two halves of the key's queue lock.
  Params claim_queue_params(const std::string& key, const std::string& kind) const {
    const auto id = static_cast<std::uint64_t>(key_hash(t_.prefix, key));
    return {key, kind, std::to_string(static_cast<std::int32_t>(id >> 32)),
            std::to_string(static_cast<std::int32_t>(id & 0xffffffffULL))};
  }

  // The release's warm-up, with sample values of its parameters (prepared and planned, never
  // run), behind a Sync of its own.
  Statement release_warm_up(const LockRequest& req) const {
    Params p{req.key, "0", "true", "0"};
    append_sample_history_params(p, req, strategy_, keep_);
    return {.sql = release_sql_, .params = std::move(p), .warm_up = true, .sync_after = true, .prepared = true};
  }

  // Columns: got, token, acquired_at, (unlock), owner, host, pid, token, strategy,
  // acquired_at, db now, due in, name; a semaphore's slot: then the header's recorded count.
  static Result<AcquireOutcome> outcome(const QueryResult& r, const LockRequest& req) {
    AcquireOutcome out;
    if (r.rows() != 1) return out;
    if (!r.is_null(0, 1)) {
      out.state = AcquireOutcome::State::acquired;
      out.token = r.int64(0, 1);
      out.acquired_at_ms = r.opt_int64(0, 2);
      return out;
    }
    const bool slot = !req.semaphore.empty();
    // The lock was ours and the row said no: a semaphore's header (for a slot: the header, or
    // no row seen; for a plain lock: a header row), else --min-interval's not yet.
    const bool header = slot ? r.is_null(0, 12) || r.text(0, 12) == req.semaphore : r.text(0, 8) == semaphore_marker;
    if (r.boolean(0, 0) && !header) {
      out.state = AcquireOutcome::State::not_due;
      if (!r.is_null(0, 11)) out.due_in = Millis(r.int64(0, 11));
      return out;
    }
    if (slot && header && !r.is_null(0, 13) && r.int64(0, 13) != req.slots) {
      out.recorded_slots = static_cast<int>(r.int64(0, 13));
      return out;
    }
    if (!r.is_null(0, 7)) {  // busy: say who holds it, for -v (the row is bookkeeping)
      LockStatus h;
      h.key = r.text(0, 12);
      h.state = LockStatus::State::held;
      h.owner = r.text(0, 4);
      h.host = r.text(0, 5);
      h.pid = r.opt_int64(0, 6).value_or(0);
      h.token = r.int64(0, 7);
      h.strategy = r.text(0, 8);
      h.acquired_at_ms = r.opt_int64(0, 9);
      h.db_now_ms = r.int64(0, 10);
      out.holder = h;
    }
    return out;
  }

  std::optional<LockStatus> read_holder(const LockRequest& req) {
    auto r = bookkeeping().exec(holder_sql_, {req.key, ms_param(req.min_interval)});
    if (!r) return std::nullopt;
    auto out = outcome(*r, req);
    if (!out || !out->holder) return std::nullopt;
    out->holder->key = req.key;
    return out->holder;
  }

  // busy (55P03 and friends) is an answer, not an error.
  // So is a semaphore slot taken by someone else between the snapshot and the upsert.
  static Result<AcquireOutcome> busy_or(const Error& e) {
    if (e.kind == ErrorKind::busy || slot_taken_meanwhile(e)) return AcquireOutcome{};
    return std::unexpected(e);
  }

  void drop_server_lock() {
    if (!holder_->is_open()) return;
    if (strategy_ == Strategy::advisory) {
      // This session holds at most one advisory lock (ours), so unlocking all of them is
      // pg_advisory_unlock(id) without the risk of a stacked second hold staying behind.
      auto r = holder_->exec("SELECT pg_advisory_unlock_all()");
      if (!r) holder_->close();  // closing frees whatever the session held
    } else if (holder_->transaction_open()) {
      auto r = holder_->exec("ROLLBACK");
      if (!r) holder_->close();
    }
  }

  Strategy strategy_;
  std::shared_ptr<Connection> holder_;
  std::unique_ptr<Connection> book_;  // for-update and txn-insert only
  Tables t_;
  int keep_;
  std::string try_lock_sql_, wait_lock_sql_, book_sql_, try_slot_sql_, wait_slot_sql_, book_slot_sql_, release_sql_, claim_sql_, lock_row_sql_, insert_claim_sql_,
      try_insert_claim_sql_,
      holder_sql_, end_txn_sql_;
  std::string key_;
  std::optional<std::int64_t> token_;
  LockRequest held_req_;
};

}  // namespace

Result<std::unique_ptr<Locker>> make_session_locker(Strategy s, std::shared_ptr<Connection> holder, const Dsn& dsn,
                                                   const BackendOptions& options, Tables t) {
  std::unique_ptr<Connection> book;
  if (s != Strategy::advisory) {
    auto opened = Connection::open(dsn, options, ConnectionRole::bookkeeping);
    if (!opened) return std::unexpected(opened.error());
    book = std::move(*opened);
  }
  return std::unique_ptr<Locker>(
      std::make_unique<SessionLocker>(s, std::move(holder), std::move(book), std::move(t), options.history_keep));
}

}  // namespace dblock::postgres

// The lease strategy: a row per key taken by one conditional upsert, renewed by heartbeat,
// released by an owner- and token-checked update. Every statement runs on one connection (the
// Backend's, taken over), and a repeated statement is executed from the connection's statement
// cache, so it is one round trip (the first one too on MariaDB: prepare and execute go together).
// A run costs acquire 1 and release 1 (with its history row on MariaDB) after the connection's
// handshake and init command.
//
// Waiters are woken by the server, not by polling: the holder keeps a GET_LOCK on the key's
// wake name (wake_name) while it holds the lease, taken inside the acquire and given back by
// the release, so a waiter blocks in GET_LOCK on that name until the release, then retries
// at once. One waiter does: the one holding the key's queue name (queue_name); the others
// wait for that, so a release wakes one waiter, not all of them. A holder that died gave the
// name back with its session, and one whose lease ran out is not waited for beyond the slice
// core allows: the lease's own expiry still decides.
#include <algorithm>
#include <chrono>

#include "backends/mysql/mysql_error.hpp"
#include "backends/mysql/mysql_tables.hpp"

namespace dblock::mysql {
namespace {

// The row is free when its lease ended (or a session strategy left expires_at NULL) and,
// with --min-interval, the last start is old enough.
Sql free_condition(std::int64_t min_interval_us) {
  return Sql("((expires_at IS NULL OR expires_at <= NOW(6)) AND "
             "(? = 0 OR last_started_at IS NULL OR last_started_at <= NOW(6) - INTERVAL ? MICROSECOND))",
             min_interval_us, min_interval_us);
}

// One statement: insert the row, or take it over only when free. MySQL evaluates the update
// list left to right, each assignment seeing the columns already assigned, so every column
// the condition reads (expires_at, last_started_at) is assigned last. The last one cannot
// re-test the condition on the new expires_at; it recognises this statement's own takeover
// (acquired_at and expires_at just set) instead, and also tests the old values, which makes
// it right under MariaDB's SIMULTANEOUS_ASSIGNMENT mode too. (A row someone else took in the
// very same microsecond with the same TTL already has last_started_at = NOW(6).)
// The new token comes back through LAST_INSERT_ID(expr) as mysql_insert_id(), and affected
// rows say what happened (1 inserted, 2 taken over, 0 left alone): no second statement.
// The text is the same for every request, so the prepared statement is cached.
// A semaphore's slot row (`header_token`) gets the token its header just issued instead.
Sql acquire_statement(const Tables& t, const LockRequest& req, std::optional<std::int64_t> header_token = {}) {
  const std::int64_t mi = micros(req.min_interval);
  Sql q = holder_insert(t, req, header_token);
  q.add(", 'lease', NULL, NOW(6), NOW(6), NOW(6) + INTERVAL ? MICROSECOND, NULL, NOW(6)) ON DUPLICATE KEY UPDATE ",
        micros(req.ttl));
  auto assign = [&](const std::string& column, const std::string& value) {
    q.add(column + " = IF(").add(free_condition(mi)).add(", " + value + ", " + column + "), ");
  };
  assign("owner", "VALUES(owner)");
  assign("host", "VALUES(host)");
  assign("pid", "VALUES(pid)");
  assign("strategy", "'lease'");
  assign("session_id", "NULL");
  assign("acquired_at", "NOW(6)");
  assign("renewed_at", "NOW(6)");
  assign("released_at", "NULL");
  // Taking the row over also takes the wake lock (IF evaluates only the branch it picks). The
  // short wait covers a waiter that holds the name for the instant between its wake-up and
  // its release of it; a holder whose lease ran out may still hold it, and then waiters fall
  // back to core's backoff.
  q.add("token = IF(").add(free_condition(mi)).add(", ").add(next_token_taking_wake(t, req.key, header_token)).add(", token), ");
  assign("expires_at", "VALUES(expires_at)");
  q.add("last_started_at = IF(").add(due_condition(mi));
  q.add(" AND ((expires_at IS NULL OR expires_at <= NOW(6)) OR "
        "(acquired_at <=> NOW(6) AND expires_at <=> VALUES(expires_at))), NOW(6), last_started_at)");
  return q;
}

class LeaseLocker final : public Locker {
 public:
  LeaseLocker(std::unique_ptr<Connection> conn, Tables t, int keep)
      : conn_(std::move(conn)), t_(std::move(t)), keep_(keep) {}

  Result<AcquireOutcome> try_acquire(const LockRequest& req, Millis wait) override {
    // A busy key is retried here as soon as its holder lets go (the server wakes us), within
    // the slice core gave; a wait that ended without a release returns busy to core.
    // Once woken, this connection holds the key's queue name: the takeover gives it back, and
    // so does the end of this wait without one (mysql_tables.hpp, queue_name).
    const auto until = std::chrono::steady_clock::now() + wait;
    bool queued = false;
    for (;;) {
      auto out = with_schema(*conn_, t_, [&] { return attempt(req); });
      const bool busy = out && out->state == AcquireOutcome::State::busy;
      const auto left = std::chrono::duration_cast<Millis>(until - std::chrono::steady_clock::now());
      if (!busy || left <= Millis(0)) {
        if (queued && out && out->state != AcquireOutcome::State::acquired) (void)leave_queue(*conn_, t_, req.key);
        return out;
      }
      auto woken = wait_for_wake(*conn_, t_, req.key, left);
      if (!woken) {
        if (woken.error().kind == ErrorKind::connection) (void)conn_->reconnect();
        return std::unexpected(woken.error());
      }
      if (!*woken) return out;
      queued = true;
    }
  }

  Result<void> renew(Millis ttl) override {
    if (!held_) return fail(ErrorKind::lost, "no lease is held");
    Sql update("UPDATE " + t_.locks + " SET renewed_at = NOW(6), expires_at = NOW(6) + INTERVAL ? MICROSECOND", micros(ttl));
    update.add(" WHERE name = ? AND owner = ? AND token = ? AND released_at IS NULL", held_->key, held_->owner, held_->token);
    auto done = with_reconnect([&] { return conn_->execute(update); });
    if (!done) return std::unexpected(done.error());
    if (done->affected_rows == 0) return lost(*held_);
    return {};
  }

  Result<void> release(const ReleaseRequest& req) override {
    if (!held_) return fail(ErrorKind::lost, "no lease is held");
    // Until the update has run the lease is still ours: a release that failed (the server
    // unreachable even after a reconnect) leaves it held, to be retried or left to expire,
    // as on PostgreSQL and SQLite.
    Result<bool> still_held = compound_ ? release_in_one(req) : release_in_steps(req);
    if (!still_held && compound_ && is_unsupported_compound(still_held.error())) {
      compound_ = false;
      still_held = release_in_steps(req);
    }
    if (!still_held) return std::unexpected(still_held.error());
    const Held held = std::move(*held_);
    held_.reset();
    if (!*still_held) return lost(held);
    return {};
  }

 private:
  using Held = HeldLock;

  // One attempt: the upsert, and on the cold path what the caller needs to know.
  Result<AcquireOutcome> attempt(const LockRequest& req) {
    if (!req.semaphore.empty()) return attempt_slot(req);
    // No retry here: had the lost reply carried our takeover, a retry would report busy on
    // our own row. Reconnect for the next attempt, which core schedules.
    auto done = conn_->execute(acquire_statement(t_, req));
    if (!done) return failed(done.error());
    if (done->affected_rows == 0) return not_taken(req);
    return taken(req, done->affected_rows == 1 ? 1 : static_cast<std::int64_t>(done->insert_id), done->affected_rows == 1);
  }

  // A semaphore's slot: its header, then the slot row as above with the header's token, in one
  // transaction (src/backends/README.md "Semaphores"); a slot not taken rolls the header back.
  Result<AcquireOutcome> attempt_slot(const LockRequest& req) {
    auto header = begin_slot(*conn_, t_, req);
    if (!header) return failed(header.error());
    if (!*header) return header_busy(*conn_, t_, req);
    auto done = conn_->execute(acquire_statement(t_, req, *header));
    const bool took = done && done->affected_rows != 0;
    if (auto end = end_slot(*conn_, took); !end) return failed(end.error());
    if (!done) return failed(done.error());
    if (!took) return not_taken(req);
    return taken(req, **header, done->affected_rows == 1);
  }

  Result<AcquireOutcome> failed(const Error& e) {
    if (e.kind == ErrorKind::connection) (void)conn_->reconnect();
    return std::unexpected(e);
  }

  Result<AcquireOutcome> taken(const LockRequest& req, std::int64_t token, bool new_row) {
    AcquireOutcome out;
    out.state = AcquireOutcome::State::acquired;
    out.token = token;
    held_ = Held{req.key, req.owner, req.host, req.pid, out.token};
    // A new row (the key's first run) took no wake lock inside the insert: take it now.
    if (new_row) (void)take_wake(*conn_, t_, req.key);
    return out;
  }

  // Cold path: tell who holds it, or when it is due.
  Result<AcquireOutcome> not_taken(const LockRequest& req) {
    AcquireOutcome out;
    auto row = read_lock(*conn_, t_, req.key);
    if (!row) return std::unexpected(row.error());
    if (*row && (*row)->state == LockStatus::State::held && (*row)->strategy == "lease") {
      out.state = AcquireOutcome::State::busy;
      out.holder = **row;
      return out;
    }
    auto due = due_in(*conn_, t_, req.key, req.min_interval);
    if (!due) return std::unexpected(due.error());
    out.state = *due > Millis(0) ? AcquireOutcome::State::not_due : AcquireOutcome::State::busy;
    if (out.state == AcquireOutcome::State::not_due) out.due_in = *due;
    if (*row) out.holder = **row;
    return out;
  }

  // The release UPDATE, the history row and the pruning as one transaction, then the wake
  // lock's release, in one MariaDB compound statement: one round trip, every value bound. A lease no longer ours
  // (the update found no row) is told by the block's own SIGNAL, raised after everything else
  // ran (autocommit: the history row stays).
  Result<bool> release_in_one(const ReleaseRequest& req) {
    Sql block("BEGIN NOT ATOMIC DECLARE held INT DEFAULT 0; ");
    block.add(one_transaction).add(lock_header_of(t_, held_->key)).add(release_update(req)).add("; SET held = ROW_COUNT(); ");
    if (req.history) {
      const RunRecord ok = completed(*req.history, *held_, true);
      block.add(history_insert(t_, ok, Sql("IF(held > 0, ?, ?)", to_string(ok.outcome), to_string(RunOutcome::lost)),
                                held_->key));
      block.add("; ").add(history_prune_block(t_, ok.key, keep_)).add("; ");
    }
    block.add("COMMIT; ").add(release_wake(t_, held_->key)).add("; ");
    block.add("IF held = 0 THEN SIGNAL SQLSTATE '45000'; END IF; END");
    auto done = with_reconnect([&] { return conn_->execute(block); });
    if (done) return true;
    if (is_user_signal(done.error())) return false;
    return std::unexpected(done.error());
  }

  // The same in separate statements, for servers that cannot prepare a compound statement.
  Result<bool> release_in_steps(const ReleaseRequest& req) {
    auto done = with_reconnect([&] { return conn_->execute(release_update(req)); });
    if (!done) return std::unexpected(done.error());
    (void)conn_->execute(release_wake(t_, held_->key));
    const bool still_held = done->affected_rows != 0;
    // The run happened even when the lease was lost meanwhile: its history row is still written.
    if (req.history)
      if (auto r = write_history(*conn_, t_, completed(*req.history, *held_, still_held), keep_, held_->key); !r)
        return std::unexpected(r.error());
    return still_held;
  }

  Sql release_update(const ReleaseRequest& req) const {
    Sql update("UPDATE " + t_.locks +
                   " SET released_at = NOW(6), expires_at = GREATEST(NOW(6), acquired_at + INTERVAL ? MICROSECOND)",
               micros(req.min_hold));
    if (req.finished_run) update.add(", last_finished_at = NOW(6), last_exit_code = ?", req.exit_code);
    update.add(" WHERE name = ? AND owner = ? AND token = ? AND released_at IS NULL", held_->key, held_->owner, held_->token);
    return update;
  }

  static RunRecord completed(RunRecord run, const Held& held, bool still_held) {
    return complete_run_record(std::move(run), held, "lease", still_held);
  }

  // A lease survives a short outage: reconnect once and repeat the statement, which is safe
  // because every lease statement is compared on owner and token (dblock(1), STRATEGIES).
  template <class F>
  auto with_reconnect(F&& statement) -> decltype(statement()) {
    return mysql::with_reconnect(*conn_, std::forward<F>(statement));
  }

  static std::unexpected<Error> lost(const Held& held) {
    return fail(ErrorKind::lost, "lease on '" + held.key + "' (token " + std::to_string(held.token) +
                                     ") is no longer held by " + held.owner + ": it expired and was taken, or was released");
  }

  std::unique_ptr<Connection> conn_;
  Tables t_;
  int keep_;
  std::optional<Held> held_;
  bool compound_ = true;  // the server prepares BEGIN NOT ATOMIC ... END (MariaDB)
};

}  // namespace

Result<std::unique_ptr<Connection>> connection_for_locker(const Dsn& dsn, const BackendOptions& options,
                                                          std::unique_ptr<Connection> conn) {
  if (conn) return conn;
  return Connection::open(dsn, options);
}

Result<std::unique_ptr<Locker>> make_lease_locker(const Dsn& dsn, const BackendOptions& options, Tables t,
                                                  std::unique_ptr<Connection> conn) {
  auto c = connection_for_locker(dsn, options, std::move(conn));
  if (!c) return std::unexpected(c.error());
  return std::unique_ptr<Locker>(std::make_unique<LeaseLocker>(std::move(*c), std::move(t), options.history_keep));
}

}  // namespace dblock::mysql

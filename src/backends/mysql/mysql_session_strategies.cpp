// Session strategies: the lock lives in a server session and dies with it.
//  advisory    GET_LOCK on a name derived from the key (hashed to the 64-character limit)
//  for-update  SELECT ... FOR UPDATE on a pre-inserted <prefix>claims row, transaction held open
//  txn-insert  INSERT of the <prefix>claims row in a transaction held open under READ COMMITTED;
//              others block on the primary key until the holder rolls back
// The token and holder bookkeeping in <prefix>locks is committed on its own: for the
// transactional strategies on a second, autocommit connection, so a holder killed
// mid-transaction rolls back only its claim and the token it was given stays used.
//
// "Promptly" for a nonblocking attempt (wait 0): advisory asks GET_LOCK(name, 0) and
// for-update uses NOWAIT, both answered at once; txn-insert has no NOWAIT and sets
// innodb_lock_wait_timeout = 0, which MariaDB honours as "no wait" (MySQL raises it to its
// minimum of 1 s). Measured on MariaDB 10.11 on loopback: a busy answer in a few ms.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "backends/mysql/mysql_tables.hpp"
#include "core/semaphore.hpp"

namespace dblock::mysql {
namespace {

// The bookkeeping upsert: token + 1 and the holder columns, only when --min-interval allows
// and the row is no semaphore's header (a plain lock never takes one; the server lock on the
// key's name guards nothing there). The condition reads strategy and last_started_at, which
// are assigned last (MySQL evaluates the list left to right): once strategy is taken it is not
// 'semaphore', so last_started_at's condition still reads as before. The text is the same for
// every request, so the prepared statement is cached. With take_wake the takeover also takes
// the key's wake lock (mysql_tables.hpp, wake_name). A semaphore's slot row (`header_token`)
// gets the token its header just issued instead of token + 1.
Sql claim_statement(const Tables& t, const LockRequest& req, const std::string& kind, const std::string& session,
                    bool take_wake, std::optional<std::int64_t> header_token = {}) {
  const std::int64_t mi = micros(req.min_interval);
  Sql q = holder_insert(t, req, header_token);
  q.add(", ?, ?, NOW(6), NOW(6), NULL, NULL, NOW(6)) ON DUPLICATE KEY UPDATE ", kind, session);
  Sql cond("(NOT strategy <=> 'semaphore' AND ");
  cond.add(due_condition(mi)).add(")");
  auto assign = [&](const std::string& column, const std::string& value, bool last = false) {
    q.add(assign_if(cond, column, value)).add(last ? "" : ", ");
  };
  assign("owner", "VALUES(owner)");
  assign("host", "VALUES(host)");
  assign("pid", "VALUES(pid)");
  assign("session_id", "VALUES(session_id)");
  assign("acquired_at", "NOW(6)");
  assign("renewed_at", "NOW(6)");
  assign("expires_at", "NULL");
  assign("released_at", "NULL");
  if (take_wake)
    q.add("token = IF(").add(cond).add(", ").add(next_token_taking_wake(t, req.key, header_token)).add(", token), ");
  else if (header_token)
    q.add("token = IF(").add(cond).add(", LAST_INSERT_ID(?), token), ", *header_token);
  else
    assign("token", "LAST_INSERT_ID(token + 1)");
  assign("strategy", "VALUES(strategy)");
  assign("last_started_at", "NOW(6)", true);
  return q;
}

class SessionLocker final : public Locker {
 public:
  SessionLocker(Strategy s, Dsn dsn, BackendOptions options, Tables t, std::unique_ptr<Connection> books)
      : strategy_(s), dsn_(std::move(dsn)), options_(std::move(options)), t_(std::move(t)),
        kind_(to_string(s)), books_(std::move(books)) {}

  Result<void> open() {
    holder_.reset();
    // The row-lock strategies start with no lock wait (core's slices are under a second), set
    // with the connection rather than by a SET before the first attempt.
    const bool row_lock = strategy_ != Strategy::advisory;
    auto h = Connection::open(dsn_, options_, ConnectionRole::lock_holder,
                              row_lock ? ", SESSION innodb_lock_wait_timeout = 0" : "");
    if (!h) return std::unexpected(h.error());
    holder_ = std::move(*h);
    tag_ = random_tag();
    tagged_.reset();
    lock_wait_s_.reset();
    if (row_lock) lock_wait_s_ = 0;
    if (strategy_ == Strategy::txn_insert)
      // No gap locks, and a second inserter of the same key waits on the first one's row.
      if (auto r = holder_->query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"); !r) return r;
    if (strategy_ != Strategy::advisory && !books_) {
      auto b = Connection::open(dsn_, options_);
      if (!b) return std::unexpected(b.error());
      books_ = std::move(*b);
    }
    return {};
  }

  // Dropping the connection frees the lock only once the server has processed the quit; give
  // it back first and forget the session in the row, so status shows the key free at once.
  ~SessionLocker() override {
    if (!held_ || !holder_) return;
    if (!give_back(held_->key)) return;
    (void)books().execute(Sql("UPDATE " + t_.locks + " SET session_id = NULL WHERE name = ? AND token = ?",
                              held_->key, held_->token));
  }

  int session_fd() const override { return held_ && holder_ ? holder_->socket() : -1; }

  Result<AcquireOutcome> try_acquire(const LockRequest& req, Millis wait) override {
    if (held_) return fail(ErrorKind::internal, "this locker already holds '" + held_->key + "'");
    if (!holder_)
      if (auto r = open(); !r) return std::unexpected(r.error());
    // Every statement rolled back or gave back what it took before reporting an error, so a
    // missing schema is created (on the bookkeeping connection) and the attempt made again.
    // The row-lock strategies wait in whole seconds only, so a slice under a second is a
    // NOWAIT attempt; their holder keeps the key's wake lock on its bookkeeping connection
    // (advisory needs none: GET_LOCK itself blocks), so a busy attempt blocks on that until
    // the release and is made again at once, within the slice.
    // Once woken, the bookkeeping connection holds the key's queue name: the takeover gives it
    // back, and so does the end of this wait without one (mysql_tables.hpp, queue_name).
    const auto until = std::chrono::steady_clock::now() + wait;
    bool queued = false;
    for (;;) {
      const auto left = std::chrono::duration_cast<Millis>(until - std::chrono::steady_clock::now());
      auto out = with_schema(books(), t_, [&] { return attempt(req, std::max(left, Millis(0))); });
      const bool busy = out && out->state == AcquireOutcome::State::busy;
      const auto rest = std::chrono::duration_cast<Millis>(until - std::chrono::steady_clock::now());
      if (!busy || !wakes() || rest <= Millis(0)) {
        if (queued && out && out->state != AcquireOutcome::State::acquired) (void)leave_queue(books(), t_, req.key);
        return out;
      }
      auto woken = wait_for_wake(books(), t_, req.key, rest);
      if (!woken || !*woken) return out;
      queued = true;
    }
  }

  Result<AcquireOutcome> attempt(const LockRequest& req, Millis wait) {
    // A wait longer than the read timeout would look like a dead server: wait in slices,
    // core calls again until its own deadline.
    const std::int64_t wait_ms = std::clamp<std::int64_t>(wait.count(), 0, holder_->max_block_ms());

    auto got = take_server_lock(req.key, wait_ms);
    if (!got && got.error().kind == ErrorKind::connection) {
      // Nothing is held yet, so a holder session that the server ended (its idle limit passed
      // while a waiter slept until --min-interval was due) is simply replaced, once.
      if (auto r = open(); !r) return session_error(r.error());
      got = take_server_lock(req.key, wait_ms);
    }
    if (!got) return session_error(got.error());
    AcquireOutcome out;
    if (!*got) {
      out.state = AcquireOutcome::State::busy;
      if (auto row = read_lock(books(), t_, req.key); row && *row) out.holder = **row;
      return out;
    }

    if (!req.semaphore.empty()) return claim_slot(req);
    auto claimed = books_execute(claim_statement(t_, req, kind_, session_text(), wakes()));
    if (!claimed || claimed->affected_rows == 0) {
      (void)give_back(req.key);
      if (!claimed) return std::unexpected(claimed.error());
      return not_claimed(req);
    }
    return claimed_row(req, claimed->affected_rows == 1 ? 1 : static_cast<std::int64_t>(claimed->insert_id),
                       claimed->affected_rows == 1);
  }

  // A semaphore's slot, its server lock taken: header and slot row in one transaction on the
  // bookkeeping connection (src/backends/README.md "Semaphores"). Not taken: the server lock
  // goes back and nothing was written.
  Result<AcquireOutcome> claim_slot(const LockRequest& req) {
    auto header = begin_slot(books(), t_, req);
    if (!header || !*header) {
      (void)give_back(req.key);
      if (!header) return books_error(header.error());
      return header_busy(books(), t_, req);
    }
    auto claimed = books().execute(claim_statement(t_, req, kind_, session_text(), wakes(), *header));
    const bool took = claimed && claimed->affected_rows != 0;
    auto end = end_slot(books(), took);
    if (!end || !took) {
      (void)give_back(req.key);
      if (!claimed) return books_error(claimed.error());
      if (!end) return books_error(end.error());
      return not_claimed(req);
    }
    return claimed_row(req, **header, claimed->affected_rows == 1);
  }

  // A transaction cannot be repeated on a new connection as books_execute repeats a statement:
  // reconnect the bookkeeping connection (it holds no lock) for the next attempt.
  std::unexpected<Error> books_error(Error e) {
    if (e.kind == ErrorKind::connection && books_) (void)books_->reconnect();
    return std::unexpected(std::move(e));
  }

  Result<AcquireOutcome> claimed_row(const LockRequest& req, std::int64_t token, bool new_row) {
    AcquireOutcome out;
    out.state = AcquireOutcome::State::acquired;
    out.token = token;
    held_ = Held{req.key, req.owner, req.host, req.pid, out.token};
    // A new row (the key's first run) took no wake lock inside the insert: take it now.
    if (wakes() && new_row) (void)take_wake(books(), t_, req.key);
    return out;
  }

  // The bookkeeping upsert left the row alone (the server lock already given back): a
  // semaphore's header is busy with that header as holder; otherwise --min-interval said not due.
  Result<AcquireOutcome> not_claimed(const LockRequest& req) {
    AcquireOutcome out;
    auto row = read_lock(books(), t_, req.key);
    if (!row) return std::unexpected(row.error());
    if (*row && (*row)->strategy == semaphore_marker) {
      out.state = AcquireOutcome::State::busy;
      out.holder = **row;
      return out;
    }
    auto due = due_in(books(), t_, req.key, req.min_interval);
    if (!due) return std::unexpected(due.error());
    out.state = AcquireOutcome::State::not_due;
    out.due_in = *due;
    return out;
  }

  Result<void> renew(Millis) override {
    if (!held_ || !holder_) return fail(ErrorKind::lost, "no session lock is held");
    Result<bool> alive = prove_held();
    if (!alive) return session_error(alive.error());
    if (!*alive) return fail(ErrorKind::lost, "the " + kind_ + " lock on '" + held_->key + "' is no longer held by this session");
    return {};
  }

  Result<void> release(const ReleaseRequest& req) override {
    if (!held_) return fail(ErrorKind::lost, "no session lock is held");
    const Held held = *held_;
    Sql update("UPDATE " + t_.locks + " SET released_at = NOW(6)");
    if (req.finished_run) update.add(", last_finished_at = NOW(6), last_exit_code = ?", req.exit_code);
    update.add(" WHERE name = ? AND owner = ? AND token = ? AND released_at IS NULL", held.key, held.owner, held.token);
    // Advisory writes on the holder connection; if that died the lock died with it, and a
    // fresh connection still records the release.
    if (!holder_ && strategy_ == Strategy::advisory)
      if (auto r = open(); !r) return std::unexpected(r.error());
    auto updated = books_execute(update, /*retry=*/true);
    // The server lock is given back whatever the update did, so from here on nothing is held
    // (as on PostgreSQL): a session lock cannot outlive a release by being retried later.
    auto gave_back = give_back(held.key);
    held_.reset();
    const bool still_held = updated && gave_back && updated->affected_rows != 0;
    // The wake lock goes only now, after the lock itself: a waiter it wakes finds the key free.
    Result<void> history{};
    if (updated) history = finish_release(held, req.history ? std::optional(completed(*req.history, held, still_held))
                                                            : std::nullopt);
    if (!updated) return std::unexpected(updated.error());
    if (!history) return history;
    if (!gave_back || updated->affected_rows == 0)
      return fail(ErrorKind::lost, "the " + kind_ + " lock on '" + held.key + "' (token " + std::to_string(held.token) +
                                       ") was already gone at release");
    return {};
  }

 private:
  using Held = HeldLock;

  RunRecord completed(RunRecord run, const Held& held, bool still_held) const {
    return complete_run_record(std::move(run), held, kind_, still_held);
  }

  Connection& books() { return books_ ? *books_ : *holder_; }

  // The row-lock strategies keep a wake lock for their waiters (try_acquire).
  bool wakes() const { return strategy_ != Strategy::advisory && books_; }

  // The wake lock's release, then the history row and its pruning, on the bookkeeping
  // connection: on MariaDB one compound statement (one round trip, every value bound). The
  // lock itself is already given back, so the woken waiter's attempt runs while the history
  // is written instead of after it.
  Result<void> finish_release(const Held& held, const std::optional<RunRecord>& run) {
    if (!run && !wakes()) return {};
    const Sql wake_release = release_wake(t_, held.key);
    if (compound_ && run) {
      Sql block("BEGIN NOT ATOMIC ");
      block.add(rollback_on_error);
      if (wakes()) block.add(wake_release).add("; ");
      block.add("START TRANSACTION; ").add(lock_header_of(t_, held.key)).add(history_insert(t_, *run, Sql("?", to_string(run->outcome)), held.key)).add("; ");
      block.add(history_prune_block(t_, run->key, options_.history_keep)).add("; COMMIT; ");
      block.add("END");
      auto done = books_execute(block);
      if (done || !is_unsupported_compound(done.error())) return done ? Result<void>() : std::unexpected(done.error());
      compound_ = false;
    }
    if (wakes()) (void)books().execute(wake_release);
    Result<void> history{};
    if (run) history = write_history(books(), t_, *run, options_.history_keep, held.key);
    return history;
  }

  // What status and `release --force` find the holder by (holder_of_row): advisory's lock name
  // holds the key, so the connection id goes with it; the row locks' go with the holder tag.
  std::string session_text() const {
    const std::string id = std::to_string(holder_->session_id());
    return strategy_ == Strategy::advisory ? id : id + ":" + tag_;
  }

  // 128 random bits as 32 hex digits, new with every lock session.
  static std::string random_tag() {
    std::random_device rd;
    std::string out;
    for (int i = 0; i < 4; ++i) {
      char part[9];
      std::snprintf(part, sizeof part, "%08x", static_cast<unsigned>(rd()));
      out += part;
    }
    return out;
  }

  // The bookkeeping connection is autocommit and holds no lock, so reconnecting it is safe;
  // advisory has none of its own (its holder connection holds no transaction).
  Result<Outcome> books_execute(const Sql& statement, bool retry = false) {
    if (!books_ && !holder_) return fail(ErrorKind::lost, "the session is gone");
    auto r = books().execute(statement);
    if (r || r.error().kind != ErrorKind::connection || !(books_ || retry)) return r;
    if (books_) {
      if (auto c = books_->reconnect(); !c) return std::unexpected(c.error());
    } else if (auto c = open(); !c) {
      return std::unexpected(c.error());
    }
    return books().execute(statement);
  }

  // True when the lock was taken, false when someone else holds it.
  Result<bool> take_server_lock(const std::string& key, std::int64_t wait_ms) {
    if (strategy_ == Strategy::advisory) {
      // GET_LOCK is re-entrant on one connection: refuse rather than "succeed" twice.
      Sql q("SELECT IF(IS_USED_LOCK(");
      q.add(advisory_name(t_, key)).add(") <=> CONNECTION_ID(), NULL, GET_LOCK(").add(advisory_name(t_, key));
      q.add(", ?))", static_cast<double>(wait_ms) / 1000.0);
      auto r = holder_->execute(q);
      if (!r) return std::unexpected(r.error());
      const Value& v = r->rows.at(0).at(0);
      if (!v) return fail(ErrorKind::internal, "GET_LOCK for '" + key + "' is already held by this connection");
      return *v == "1";
    }
    const std::int64_t wait_s = wait_ms / 1000;  // whole seconds only, never longer than asked
    if (strategy_ == Strategy::for_update) {
      // The claims row exists after the key's first for-update run, so it is locked straight
      // away; only a missing one is inserted (committed) and locked again. INSERT IGNORE on an
      // existing row would wait for the holder's row lock; if a racer's insert got in between,
      // that wait is bounded by the same lock wait as the lock itself and means busy.
      if (auto r = set_lock_wait(wait_s); !r) return std::unexpected(r.error());
      for (int pass = 0;; ++pass) {
        if (auto r = holder_->query("START TRANSACTION"); !r) return std::unexpected(r.error());
        // The holder tag is taken in the same statement, only once the row is locked (the
        // select list is evaluated for a locked row; none when busy or missing).
        Sql lock("SELECT name, GET_LOCK(");
        lock.add(holder_tag(t_, key, tag_)).add(", 0) FROM " + t_.claims + " WHERE name = ? AND kind = ? FOR UPDATE", key, kind_);
        auto locked = holder_->execute(lock.add(wait_s > 0 ? "" : " NOWAIT"));
        if (!locked || !locked->rows.empty() || pass > 0) return settle(locked, key);
        if (auto r = holder_->query("ROLLBACK"); !r) return std::unexpected(r.error());
        auto r = holder_->execute(Sql("INSERT IGNORE INTO " + t_.claims + " (name, kind) VALUES (?, ?)", key, kind_));
        if (!r && r.error().kind == ErrorKind::busy) return false;
        if (!r) return std::unexpected(r.error());
      }
    }
    if (auto r = set_lock_wait(wait_s); !r) return std::unexpected(r.error());
    if (auto r = holder_->query("START TRANSACTION"); !r) return std::unexpected(r.error());
    // The holder tag once the row is in: on MariaDB in the same round trip, a compound
    // statement that a busy INSERT ends before the GET_LOCK (`INSERT ... RETURNING GET_LOCK(..)`
    // would too, but a busy one left the connection waiting 8 s at its next statement).
    const Sql insert("INSERT INTO " + t_.claims + " (name, kind) VALUES (?, ?)", key, kind_);
    const Sql tag = Sql("DO GET_LOCK(").add(holder_tag(t_, key, tag_)).add(", 0)");
    if (compound_) {
      auto inserted = holder_->execute(Sql("BEGIN NOT ATOMIC ").add(insert).add("; ").add(tag).add("; END"));
      if (inserted || !is_unsupported_compound(inserted.error())) return settle(inserted, key);
      compound_ = false;
    }
    auto inserted = holder_->execute(insert);
    if (inserted)
      if (auto r = holder_->execute(tag); !r) return std::unexpected(r.error());
    return settle(inserted, key);
  }

  // After the locking statement of a transactional strategy: busy rolls the transaction back;
  // taken, the holder tag was taken with it.
  Result<bool> settle(const Result<Outcome>& locked, const std::string& key) {
    if (locked) {
      tagged_ = key;
      return true;
    }
    if (locked.error().kind == ErrorKind::connection) return std::unexpected(locked.error());
    (void)holder_->query("ROLLBACK");
    if (locked.error().kind == ErrorKind::busy) return false;
    return std::unexpected(locked.error());
  }

  Result<void> set_lock_wait(std::int64_t seconds) {
    if (lock_wait_s_ == seconds) return {};
    if (auto r = holder_->execute(Sql("SET SESSION innodb_lock_wait_timeout = ?", seconds)); !r)
      return std::unexpected(r.error());
    lock_wait_s_ = seconds;
    return {};
  }

  Result<bool> prove_held() {
    if (strategy_ == Strategy::advisory) {
      auto r = holder_->execute(Sql("SELECT IS_USED_LOCK(").add(advisory_name(t_, held_->key)).add(") <=> CONNECTION_ID()"));
      if (!r) return std::unexpected(r.error());
      return r->rows.at(0).at(0) == "1";
    }
    if (strategy_ == Strategy::txn_insert) {
      // Our own uncommitted row is visible to us only while the transaction is open.
      auto r = holder_->execute(Sql("SELECT COUNT(*) FROM " + t_.claims + " WHERE name = ? AND kind = ?", held_->key, kind_));
      if (!r) return std::unexpected(r.error());
      return r->rows.at(0).at(0) == "1";
    }
    auto r = holder_->execute("SELECT 1");
    if (!r) return std::unexpected(r.error());
    return true;
  }

  Result<void> give_back(const std::string& key) {
    if (!holder_) return fail(ErrorKind::lost, "the session is gone");
    if (strategy_ != Strategy::advisory) {
      if (!tagged_) return holder_->query("ROLLBACK");
      // The tag goes with the lock: a session that keeps it could be taken for the key's
      // holder. On MariaDB both in one round trip.
      const Sql untag = Sql("DO RELEASE_LOCK(").add(holder_tag(t_, *tagged_, tag_)).add(")");
      tagged_.reset();
      if (compound_) {
        auto both = holder_->execute(Sql("BEGIN NOT ATOMIC ROLLBACK; ").add(untag).add("; END"));
        if (both || !is_unsupported_compound(both.error())) return both ? Result<void>() : std::unexpected(both.error());
        compound_ = false;
      }
      if (auto r = holder_->query("ROLLBACK"); !r) return r;
      if (auto r = holder_->execute(untag); !r) return std::unexpected(r.error());
      return {};
    }
    auto r = holder_->execute(Sql("SELECT RELEASE_LOCK(").add(advisory_name(t_, key)).add(")"));
    if (!r) return std::unexpected(r.error());
    if (r->rows.at(0).at(0) != "1") return fail(ErrorKind::lost, "GET_LOCK was not held");
    return {};
  }

  // A session strategy never reconnects silently: a dropped holder connection is a lost lock.
  std::unexpected<Error> session_error(Error e) {
    if (e.kind == ErrorKind::connection) {
      holder_.reset();
      if (held_) {
        e.kind = ErrorKind::lost;
        e.message = "the " + kind_ + " lock on '" + held_->key + "' was lost with its session: " + e.message;
      }
    }
    return std::unexpected(std::move(e));
  }

  Strategy strategy_;
  Dsn dsn_;
  BackendOptions options_;
  Tables t_;
  std::string kind_;
  std::unique_ptr<Connection> books_;   // autocommit, for <prefix>locks (the Backend's, taken over)
  std::unique_ptr<Connection> holder_;  // holds the server lock
  std::optional<std::int64_t> lock_wait_s_;
  std::optional<Held> held_;
  bool compound_ = true;  // the server prepares BEGIN NOT ATOMIC ... END (MariaDB)
  std::string tag_;                     // the lock session's random tag (holder_tag)
  std::optional<std::string> tagged_;   // the key whose holder tag the lock session holds
};

}  // namespace

Result<std::unique_ptr<Locker>> make_session_locker(Strategy s, const Dsn& dsn, const BackendOptions& options,
                                                    Tables t, std::unique_ptr<Connection> conn) {
  auto locker = std::make_unique<SessionLocker>(s, dsn, options, std::move(t), std::move(conn));
  if (auto r = locker->open(); !r) return std::unexpected(r.error());
  return std::unique_ptr<Locker>(std::move(locker));
}

}  // namespace dblock::mysql

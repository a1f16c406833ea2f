#include "core/sql/lock_rows.hpp"
#include "core/sql/session_locker.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <thread>
#include <utility>

#include "core/sql/lease_locker.hpp"
#include "core/sql/lock_steps.hpp"

namespace dblock::sql {
namespace {

// A numbered take's answer (LockStatements::advisory_numbered_*): session.take's three columns,
// then whether it took (1), did not (0) or its own gate did not open (2); a refusal's columns
// may follow (ServerLock::refusal).
constexpr int numbered_flag = 3;
constexpr int numbered_columns = numbered_flag + 1;

std::unexpected<Error> gone() { return fail(ErrorKind::connection, "the lock session is closed"); }

// The one answer of a lock statement: (1) yes, (0) or NULL no.
bool yes(const Rows& r) { return r.size() == 1 && !r[0].is_null(0) && r[0].int64(0) != 0; }

// The server lock in the holder session, on the dialect's LockStatements. A busy or failed take
// leaves nothing held and no transaction open.
class ServerLock {
 public:
  ServerLock(Strategy strategy, std::unique_ptr<HolderSession> holder, const LockStatements& statements)
      : strategy_(strategy), kind_(to_string(strategy)), h_(std::move(holder)), st_(statements) {}

  // Takes the lock on `key`, the server waiting up to `wait` (it may wait less: core calls again).
  // true: taken; false: someone else holds it. ErrorKind::connection: the holder is gone, and
  // with it anything it held.
  // A row lock's `meanwhile` runs once its statement is sent, before its answer is read (the
  // bookkeeping session's failover read, in the same round trip); false: the lock goes back
  // (take answers false) and the caller says why.
  // `number` (a row lock's, LockStatements::row_numbered with its parameters): sent with the lock
  // statement where the dialect can (HolderSession::send_numbering); its answer is numbered()'s.
  Result<bool> take(const std::string& key, Millis wait, const std::function<bool()>& meanwhile = {},
                    const std::optional<Params>& number = std::nullopt) {
    if (h_->socket() < 0) return gone();
    const Millis w = h_->server_wait(std::max(wait, Millis(0)), row_lock());
    const Params p = params(key, w);
    if (row_lock()) return take_row(key, p, w, meanwhile, number);
    auto r = h_->run(w.count() <= 0 && !st_.advisory_try.empty() ? st_.advisory_try : st_.advisory_wait, p, w);
    if (!r) return failed(r.error(), key);
    if (r->size() == 1 && (*r)[0].is_null(0))
      return fail(ErrorKind::internal, "the lock on '" + key + "' is already held by this session");
    if (!yes(*r)) return false;
    if (auto ok = h_->holding(key, *r); !ok) return failed(ok.error(), key);
    return true;
  }

  // Whether the holder still holds `key` (the heartbeat's proof; never reopens).
  Result<bool> holds(const std::string& key) {
    if (h_->socket() < 0) return gone();
    // A row lock lives as long as its transaction.
    if (row_lock() && !h_->transaction_open()) return false;
    const Statement& proof = strategy_ == Strategy::advisory     ? st_.advisory_holds
                             : strategy_ == Strategy::txn_insert ? st_.holds_claim
                                                                 : st_.alive;
    auto r = h_->run(proof, params(key, Millis(0)), Millis(0));
    if (!r) {
      h_->close();  // whatever it held is gone with it
      return std::unexpected(r.error());
    }
    return yes(*r);
  }

  // Lets the lock on `key` go: the unlock, whose answer says whether it was this session's (a
  // reconnect of a bookkeeping session it shares replaced it, say), or the end of the
  // transaction, then the holder tag, which goes with it, never before. An error means the lock
  // was not held to the end.
  Result<void> give_back(const std::string& key) {
    if (h_->socket() < 0) return gone();
    if (rollback_owed_) return settle_rollback();  // it held nothing
    Result<void> r{};
    if (!row_lock()) {
      auto unlocked = h_->run(st_.advisory_give_back, params(key, Millis(0)), Millis(0));
      if (unlocked && !yes(*unlocked)) return fail(ErrorKind::lost, "the advisory lock was not held by this session");
      if (!unlocked) r = std::unexpected(unlocked.error());
    } else if (h_->transaction_open()) {
      r = h_->exec("ROLLBACK");
    }
    if (!r) h_->close();  // closing frees whatever the session held
    txn_.reset();
    // A session that the end of its transaction closed (socket() < 0) gave the tag back with it.
    auto tag = std::exchange(tagged_, std::nullopt);
    if (r && tag && h_->socket() >= 0)
      if (auto u = h_->run(st_.untag, params(*tag, Millis(0)), Millis(0)); !u) return std::unexpected(u.error());
    return r;
  }

  // Whether the lock and the row are taken in one statement of the holder, which is also the
  // bookkeeping session (a lock that outlives the commit: advisory).
  bool folds_row() const { return !row_lock() && !st_.advisory_numbered_wait.empty(); }
  // A waiter's release in its own transaction (row_release_ended) is what the next waiter will
  // wait for: made ready while no transaction is open (inside one, a preparation that failed
  // would end the transaction and the lock with it), before a wait (SessionLocker::attempt).
  // A ROLLBACK owed goes ahead of the preparation, in the next lock statement's round trip.
  void prepare_for_wait() {
    if (row_lock() && !st_.row_release_ended.empty() && settle_rollback(true)) h_->prepare(st_.row_release_ended);
  }
  // The same while the command runs, inside the lock's transaction (HolderSession::prepare_held):
  // a holder that did not wait, or whose first wait let it in, made nothing ready before.
  void prepare_held() {
    if (folds_release() && row_lock()) h_->prepare_held(st_.row_release_ended);
  }

  // Whether a plain key's release, the lock given back (or proven held to the end) and the
  // history row are one statement: advisory's there too, a row lock's in the holder's own
  // transaction, ended with it (row_release_ended).
  bool folds_release() const {
    if (row_lock()) return !st_.row_release_ended.empty() && txn_.has_value();
    return folds_row() && !st_.advisory_released.empty();
  }
  // The one the bookkeeping session runs (none for a row lock: the holder's own, row_release_ended).
  Statement release_statement() const { return row_lock() ? Statement{} : st_.advisory_released; }

  // LockStatements::advisory_released (a row lock's row_release_ended, then COMMIT) with `p`
  // (release_recorded_params): (released, ours). An error: the caller releases apart (the row
  // again, give_back, the history row), which finds out what this statement did before it failed.
  Result<std::pair<bool, bool>> give_back_recorded(const std::string& key, Params p) {
    if (h_->socket() < 0) return gone();
    if (row_lock() && !st_.row_release_ended.empty()) {
      // In the holder's transaction, ended with it: the waiter the lock lets in finds the row
      // released. A failure leaves the transaction open (failed, its lock held) or the session
      // gone; the caller releases apart, the row first.
      auto r = h_->run_and_commit(st_.row_release_ended, p);
      if (!r) return std::unexpected(r.error());
      txn_.reset();
      tagged_.reset();  // the holder tag, if any, went back with it
      if (r->empty()) return fail(ErrorKind::internal, st_.row_release_ended.id + " answered no row");
      return std::pair{(*r)[0].int64(0) != 0, (*r)[0].int64(1) != 0};
    }
    h_->bind(p, key, Millis(0));
    auto r = h_->run(st_.advisory_released, p, Millis(0));
    if (!r) return std::unexpected(r.error());
    if (r->empty()) return fail(ErrorKind::internal, st_.advisory_released.id + " answered no row");
    tagged_.reset();  // advisory takes no holder tag
    return std::pair{(*r)[0].int64(0) != 0, (*r)[0].int64(1) != 0};
  }

  // LockStatements::advisory_release_row with `p` (LeaseStatements::release's parameters): true
  // when it released the row and gave back the lock, which was this session's; false when the
  // dialect has none or it did not do both (the caller releases apart, and finds out).
  bool release_with_row(const std::string& key, Params p) {
    if (row_lock() || st_.advisory_release_row.empty() || h_->socket() < 0) return false;
    h_->bind(p, key, Millis(0));
    auto r = h_->run(st_.advisory_release_row, p, Millis(0));
    return r && r->affected > 0;
  }

  // take(), then, once taken, session_take with `number` in the same statement: its rows
  // (affected 0: not numbered, the lock held all the same); nullopt: someone else holds it.
  Result<std::optional<Rows>> take_numbered(const std::string& key, Millis wait, Params number) {
    if (h_->socket() < 0) return gone();
    const Millis w = h_->server_wait(std::max(wait, Millis(0)), false);
    h_->bind(number, key, w);
    auto r = h_->run(w.count() <= 0 && !st_.advisory_numbered_try.empty() ? st_.advisory_numbered_try
                                                                           : st_.advisory_numbered_wait,
                     number, w);
    // No row (a dialect whose statement inserts nothing when the lock was not taken): not taken.
    // 2: its own gate did not open, nothing taken (gate_unread).
    gate_unread_ = r && !r->empty() && (*r)[0].int64(numbered_flag) == 2;
    answered_ = r && !r->empty();
    // 0: not taken; with more columns, the refusal's (a dialect whose statement says who holds
    // the key, so that a contender refused needs no read of its own: refusal()).
    refusal_.reset();
    const bool refused_here = r && !r->empty() && (*r)[0].int64(numbered_flag) == 0;
    if (refused_here && (*r)[0].columns() > numbered_columns) refusal_ = std::move(*r);
    if (refusal_ || refused_here || gate_unread_ || (r && r->empty())) return std::nullopt;
    if (r)
      if (auto ok = h_->holding(key, *r); !ok) r = std::unexpected(ok.error());
    if (!r) {
      // The lock outlives the failed statement that took it, unless its wait is what ended.
      if (r.error().kind != ErrorKind::connection && r.error().kind != ErrorKind::wait_ended) (void)give_back(key);
      if (held_elsewhere(r.error().kind)) return std::nullopt;
      return std::unexpected(r.error());
    }
    r->affected = !(*r)[0].is_null(0);
    return std::move(*r);
  }

  // Whether the last take_numbered took nothing because its own read of the failover gate did
  // not open (LockStatements::advisory_numbered_wait without a :fence).
  bool gate_unread() const { return gate_unread_; }
  // Whether the last take_numbered's own read of the gate opened: an answer, and not gate_unread.
  bool gate_opened() const { return answered_ && !gate_unread_; }
  // The last take_numbered's answer when it took nothing and said who holds the key: the
  // refusal's columns after its own four (LockStatements::advisory_numbered_wait); else null.
  const Rows* refusal() const { return refusal_ ? &*refusal_ : nullptr; }
  const LockStatements& statements() const { return st_; }
  HolderSession& holder() { return *h_; }
  bool row_lock() const { return strategy_ != Strategy::advisory; }
  // LockStatements::row_numbered (empty: none).
  const Statement& row_numbered() const { return st_.row_numbered; }
  // Only called while nothing is held.
  Result<void> reopen() {
    tagged_.reset();
    rollback_owed_ = false;  // the session it was owed on is gone
    return h_->reopen();
  }

 private:

  Params params(const std::string& key, Millis w) const {
    Params p{{"key", key}, {"kind", kind_}, {"wait_ms", ms_value(w)}};
    h_->bind(p, key, w);
    return p;
  }

  // for-update locks the key's claims row, txn-insert inserts it, in a transaction held open.
  // At the head of the key's waiters the lock statement goes behind a wait in the server for
  // the holder's wake (Waiters::ahead, HolderSession::send_behind): the holder's end gives the
  // row back and then the wake, and the lock statement runs at once, so the waiter's command
  // starts two round trips after the holder's ends (the wake with the lock's answer, then the
  // numbering), where hearing the wake, then locking, then numbering was three; one where the
  // numbering goes with it (`number`, attempt). The wait lasts at most what is left of the
  // attempt's slice, and the lock statement runs after it either way: the row decides. Not with
  // a `meanwhile`, which the lock statement's wait would hold up.
  Result<bool> take_row(const std::string& key, const Params& p, Millis w, const std::function<bool()>& meanwhile,
                        const std::optional<Params>& number) {
    const bool wait = w.count() > 0;
    Waiters& waiters = h_->release_signal();
    Params take = p, wake;
    Millis bound{0};
    const Statement* ahead = waiters.ahead(key, take, !meanwhile && h_->waits_behind(), wake, bound);
    for (int pass = 0; pass < 2; ++pass) {
      if (auto ok = begin(p, w); !ok) return failed(ok.error(), key);
      if (pass == 0 && ahead) h_->send_behind(*ahead, wake);
      const Statement& lock = strategy_ == Strategy::for_update
                                  ? (wait ? st_.lock_claim : st_.lock_claim_nowait)
                                  : st_.insert_claim;
      Result<Rows> locked = fail(ErrorKind::internal, "not sent");
      const bool tagged = strategy_ == Strategy::txn_insert && !st_.tag.empty();
      auto sent = pass == 0 && number ? h_->send_numbering(lock, p, w, st_.row_numbered, *number, tagged)
                  : tagged            ? h_->send_before_tag(lock, p, w)
                                      : h_->send(lock, p, w);
      if (!sent) {
        locked = std::unexpected(sent.error());
      } else if (pass == 0 && meanwhile && !meanwhile()) {
        h_->withdraw(wait);  // not to be held
        (void)give_back(key);
        return false;
      } else {
        locked = h_->answer();
      }
      Result<Rows> tag = Rows();  // the tag's answer, txn-insert's last once it inserted
      if (locked && locked->affected > 0 && tagged)
        if (tag = h_->run(st_.tag, p, Millis(0)); !tag) locked = std::unexpected(tag.error());
      if (locked && locked->affected > 0)
        if (auto ok = h_->holding(key, tag->empty() ? *locked : *tag); !ok) locked = std::unexpected(ok.error());
      // Refused: another holds the row (a claims row still missing says nothing of a holder).
      if (pass == 0 && ahead)
        waiters.behind(key, h_->told(), locked && locked->affected > 0, !locked && held_elsewhere(locked.error().kind));
      if (!locked) return failed(locked.error(), key);
      if (locked->affected > 0) {
        if (!st_.untag.empty()) tagged_ = key;
        // The lock statement's answer, or the tag's that followed it (txn-insert's INSERT answers none).
        const Rows& said = tag->empty() ? *locked : *tag;
        if (!st_.row_release_ended.empty() && !said.empty() && !said[0].is_null(0)) txn_ = said[0].text(0);
        return true;
      }
      if (strategy_ == Strategy::txn_insert) return failed(Error{ErrorKind::busy, "taken"}, key);  // the try's answer
      // The key's claims row must exist, committed, before anyone can lock it. Its insert waits
      // for a racer's, within the same lock wait, and then means busy.
      if (auto r = h_->exec("ROLLBACK"); !r) return std::unexpected(r.error());
      auto made = h_->run(st_.make_claim, p, Millis(0));
      if (auto ok = h_->claim_made(made.has_value()); made && !ok) made = std::unexpected(ok.error());
      if (!made && held_elsewhere(made.error().kind)) return false;
      if (!made) return std::unexpected(made.error());
    }
    return false;  // the row vanished again: core tries again
  }

  // The holder's transaction, with its lock wait `w`, the ROLLBACK owed by the last one ahead of it.
  Result<void> begin(const Params& p, Millis w) {
    if (auto ok = settle_rollback(true); !ok) return ok;
    return h_->begin(st_, p, w);
  }

  // After a take that failed with `e`: busy is "someone else holds it"; anything that may have
  // taken the lock or left a transaction open gives it back; a lost holder holds nothing.
  // A row lock refused (at once, or its wait's slice over) holds nothing, so its transaction's
  // ROLLBACK is owed rather than waited for: a contender that then ends (exit 75, every host but
  // one when a crontab line fires) closes the connection, which ends it, and one that goes on
  // sends it first (settle_rollback), ahead of its next transaction, in that one's round trip: a
  // waiter is back in the server one round trip after its slice ended, where awaiting the
  // ROLLBACK made it two, a release landing in between found a round trip late.
  Result<bool> failed(const Error& e, const std::string& key) {
    if (e.kind == ErrorKind::connection) return std::unexpected(e);
    if (row_lock() && held_elsewhere(e.kind) && !tagged_) {
      rollback_owed_ = h_->transaction_open();
      return false;
    }
    if (!held_elsewhere(e.kind) || row_lock()) (void)give_back(key);
    if (held_elsewhere(e.kind)) return false;
    return std::unexpected(e);
  }

  // The ROLLBACK that failed() owed, before anything else runs on the holder session: `ahead`,
  // sent ahead of what runs there next, in its round trip (HolderSession::rollback_ahead), else
  // awaited. One that failed closes the session, which ends the transaction with it.
  Result<void> settle_rollback(bool ahead = false) {
    if (!std::exchange(rollback_owed_, false) || h_->socket() < 0) return {};
    auto r = ahead ? h_->rollback_ahead() : h_->exec("ROLLBACK");
    if (!r) h_->close();  // closing frees whatever the session held
    txn_.reset();
    return r;
  }

  Strategy strategy_;
  std::string kind_;  // the claims row's
  std::unique_ptr<HolderSession> h_;
  LockStatements st_;
  std::optional<std::string> tagged_;  // the key whose holder tag the session holds
  std::optional<std::string> txn_;     // the holder's transaction, as its lock statement answered it
  bool gate_unread_ = false;           // gate_unread()
  bool answered_ = false;              // gate_opened()
  bool rollback_owed_ = false;         // failed(), settle_rollback()
  std::optional<Rows> refusal_;        // refusal()
};

class SessionLocker final : public Locker {
 public:
  SessionLocker(Strategy strategy, std::unique_ptr<HolderSession> holder, const LockStatements& lock,
                std::shared_ptr<Session> book, const LeaseStatements& statements, std::string prefix, int keep,
                failover::ReadCheck serving)
      : strategy_(to_string(strategy)), lock_(std::make_unique<ServerLock>(strategy, std::move(holder), lock)),
        book_(std::move(book)), st_(statements), prefix_(std::move(prefix)), keep_(keep), serving_(std::move(serving)) {}

  // The server frees a dropped session's locks only once it has processed the disconnect, and
  // status must not lag: the lock goes back before the connection closes.
  ~SessionLocker() override {
    if (held_) (void)lock_->give_back(held_->key);
  }

  // One attempt, and more while the dialect hears of a release within `wait`.
  Result<AcquireOutcome> try_acquire(const LockRequest& req, Millis wait) override {
    if (held_) return fail(ErrorKind::internal, "this locker already holds " + held_->key);
    auto out = until_not_busy(lock_->holder().release_signal(), req, wait, [&](Millis left) {
      lock_->holder().release_signal().attempting(left);  // a wait ahead of the lock (take_row) waits no longer
      return with_schema(*book_, [&] { return attempt(req, left); });
    });
    // The bookkeeping session holds nothing (a dialect's release signal, if any, is on it):
    // lost in a take or a wait, it is made again for the next attempt, whose failover gate is
    // read again on it. (A lost reply may have numbered a row; the next token is greater anyway.)
    if (!out && out.error().kind == ErrorKind::connection) {
      admitted_.reset();
      (void)book_->reconnect(out.error());
    }
    return out;
  }

  // Proves the session still holds the lock; a dropped session is never replaced.
  Result<void> renew(Millis) override {
    if (!held_) return fail(ErrorKind::lost, "no session lock is held, so there is nothing to renew");
    auto holds = lock_->holds(held_->key);
    if (holds && *holds) return {};
    return lost(holds ? "is no longer held by this session" : "was lost with its session: " + holds.error().message);
  }

  // The row first, then the server lock: a waiter the lock lets in finds the row released. The
  // history row last, so the waiter does not wait for it.
  Result<void> release(const ReleaseRequest& req) override {
    if (!held_) return fail(ErrorKind::lost, "no session lock is held, so there is nothing to release");
    // In the same order, in one statement where the dialect folds them (a plain key's advisory
    // lock, its history row kept; a row lock's release and the server's word that its
    // transaction still runs, that transaction then ended without waiting): one round trip.
    // Tables missing fail it before it does anything, so it runs again once they are made; any
    // other failure leaves the steps below to find out what it did (a lost session: the lock
    // went with it, and they say so).
    if (folds_release(req)) {
      const Params p = release_recorded_params(*held_, strategy_, req, prefix_, keep_);
      auto done = with_schema(*book_, [&] { return lock_->give_back_recorded(held_->key, p); });
      if (done) {
        lock_->holder().release_signal().released(signal_key(held_->request));
        auto message = lost("was already gone at release");
        held_.reset();
        if (!done->second) return message;
        return {};
      }
    }
    const ReleaseRow what{.held = *held_, .strategy = strategy_, .write_history = false};
    admitted_.reset();  // the release may reconnect
    // --min-hold stays in the row, as a lease's does (its expires_at): session_take leaves a
    // row alone while it runs, though the server lock is free.
    const ReleaseRequest& r = req;
    // Where the holder session is the bookkeeping one and the dialect has it
    // (LockStatements::advisory_release_row), the row released and then the lock given back in
    // one statement: one round trip before the next waiter runs. When it did not do both, the
    // steps below find out what it did.
    Result<bool> released{true};
    Result<void> gave_back{};
    if (!lock_->release_with_row(held_->key, release_params(r))) {
      // The bookkeeping session holds no lock, so a statement lost with its connection runs again.
      released = with_retry(*book_, [&] { return with_schema(*book_, [&] { return release_row(*book_, st_, what, r, prefix_, keep_); }); });
      // The server lock is what excludes: given back, it was held to the end. The row alone may
      // say otherwise when a first try of its release ran but the reply was lost (a read timeout
      // on a loaded server): with_retry ran it again and found it released already, by that try.
      gave_back = lock_->give_back(held_->key);
    }
    lock_->holder().release_signal().released(signal_key(held_->request));
    auto history =
        released ? record_held_run(*book_, st_, *held_, strategy_, gave_back.has_value(), r, keep_) : Result<void>{};
    auto message = lost("was already gone at release" +
                        (gave_back ? std::string() : ": " + gave_back.error().message));
    held_.reset();
    if (!released) return std::unexpected(released.error());
    if (!history) return history;
    if (!gave_back) return message;
    return {};
  }

  // The row's release is what the next waiter waits for (release()): parsed now, while the
  // command runs.
  void prepare_release() override {
    lock_->holder().release_signal().settle();  // waiters.hpp, settle
    if (!held_) return;
    const Statement st = folds_release_ ? lock_->release_statement() : st_.release;
    if (!st.empty()) book_->prepare(st);
    else if (folds_release_) lock_->prepare_held();
  }

  int session_fd() const override { return held_ ? lock_->holder().socket() : -1; }
  int wakeup_fd() const override { return lock_->holder().release_signal().fd(); }
  void consume_wakeup() override { lock_->holder().release_signal().consume(); }

 private:
  // The server lock, then the row numbered on the bookkeeping session. Whatever stops the
  // attempt gives the server lock back: no lock is left behind, no transaction open.
  // `probe`: a waiter's first try without waiting (below), whose refusal is not looked into.
  Result<AcquireOutcome> attempt(const LockRequest& req, Millis wait, bool probe = false) {
    // The failover gate (failover.hpp) before any grant: a holder whose session was on the old
    // primary notices within its TTL that the session is gone, as a lease holder that cannot
    // renew. With it, where the dialect reads it there (serving_), whether the lock could hold
    // at all. A row lock's statement goes out first and the gate is read while it travels (one
    // round trip for both); a gate that says no then gives the lock back before anything is
    // numbered. Where a plain row lock's numbering reads the gate itself (gated_), the gate is
    // read apart only when that numbering answered no row, and the lock then goes back unless
    // it is open.
    std::optional<Result<failover::Gate>> gate;
    auto admit = [&] {
      if (!gate) gate = failover::admit_once(*book_, st_.failover, admitted_, req.ttl, serving_);
      return *gate && (*gate)->open;
    };
    auto shut = [&]() -> Result<AcquireOutcome> {
      if (!*gate) return std::unexpected(gate->error());
      return failover::delayed(**gate);
    };
    // A plain lock is numbered in the statement that takes it where the dialect folds the two;
    // a semaphore's slot never is (its header comes first, in a transaction).
    const bool fold = lock_->folds_row() && req.semaphore.empty();
    const bool overlap = lock_->row_lock();
    const bool gated = overlap && gated_ && req.semaphore.empty();
    // A folded take that does not wait reads the gate itself where it can, until the gate was
    // found open on this connection (then admit() costs nothing).
    const bool fold_gated = fold && numbered_gated_ && wait.count() <= 0 && !admitted_;
    if (!overlap && !fold_gated && !admit()) return shut();
    std::optional<Params> chained;  // a row lock's numbering sent with its lock statement (below)
    auto take = [&]() -> Result<std::optional<Rows>> {
      if (fold) {
        Params p = take_params(req, Value(), Value());
        if (gate) p.set("fence", (*gate)->fence);  // none: the take reads the gate itself (fold_gated)
        return lock_->take_numbered(req.key, wait, std::move(p));
      }
      auto got = lock_->take(req.key, wait, overlap && !gated ? std::function<bool()>(admit) : nullptr, chained);
      if (!got) return std::unexpected(got.error());
      return *got ? std::optional<Rows>(Rows()) : std::nullopt;
    };
    // A waiter numbers its row the moment its lock is granted, and releases it for the next
    // waiter: both are part of a handoff, so their statements are parsed before the wait, while
    // nothing depends on them; from the second attempt on, once a first attempt ended without the
    // lock. A run that finds the key free pays nothing for them: made ready at its first attempt,
    // the naming asked the server who serves the session whenever the bookkeeping session was
    // open before the failover read had told (e2e.postgres_round_trips, a -w run on a free key).
    bool again = false;  // an attempt after a first wait ended without the lock
    // Such a row-lock waiter at a distance (its round trip timed once, when its first attempt
    // found the key busy: chain_from) sends its numbering with its lock statement where the dialect can, the gate
    // found open already (read again, it costs no round trip): it runs in the server once the
    // lock is granted and proves that grant itself (LockStatements::row_numbered), so the command
    // starts one round trip after the holder's release, not two. One that took no row (sent too
    // early, the holder session gone, refused, its own gate not open) is numbered again as
    // before. Where session_take reads the failover gate itself (gated), the numbering must too
    // (it is then sent without a gate read apart).
    const bool chainable = overlap && (!gated || numbering_gated_) && req.semaphore.empty() &&
                           !lock_->row_numbered().empty();
    // Its first attempt asks without waiting: a free key is taken as before, in the same round
    // trips; a busy one is timed, and the wait that follows is chained where it is far. Timed
    // only after a first server wait (500 ms) had ended, a holder that let go sooner (a short
    // job) was followed two round trips later, not one (scripts/bench.sh's handoff at 10 ms).
    // Who holds the key is asked by the wait's refusal, if any, as before: once.
    if (wait.count() > 0 && chainable && !waited_once_) {
      LockRequest quiet = req;
      quiet.describe_holder = false;
      auto tried = attempt(quiet, Millis(0), true);
      if (!tried || tried->state != AcquireOutcome::State::busy) return tried;
      waited_once_ = retime_ = true;
    }
    if (wait.count() > 0 && !fold && std::exchange(waited_once_, true)) {
      again = true;
      // Timed again once, at the attempt after the first wait: on a busy machine a session just
      // made answers late (its process has run its start-up, so the scheduler lets it wait where
      // it lets one that slept run), which passed loopback for a distance; after a wait it does
      // not (faults.*.row_numbering, loopback-not-chained, with both cores busy).
      if (chainable && (!round_trip_ || std::exchange(retime_, false))) round_trip_ = timed_round_trip();
      lock_->prepare_for_wait();  // again after a reopen: a name lives with its connection
      if (!std::exchange(take_prepared_, true)) book_->prepare(st_.session_take);
      if (chainable && *round_trip_ >= chain_from && !std::exchange(numbering_prepared_, true))
        book_->prepare(lock_->row_numbered());
    }
    if (again && chainable && *round_trip_ >= chain_from) {
      if (gated) chained = take_params(req, Value(), Value());
      else if (admitted_ && admitted_->ttl >= req.ttl && admit()) chained = take_params(req, (*gate)->fence, Value());
    }
    // A first attempt (one that does not wait: a run's, or a waiter's try) sends its numbering
    // with its lock statement too where the holder session can with no gate ahead of it
    // (chains_first): it waits in the server for its proof (:poll_ms, first_poll), so a
    // free key is locked and numbered in one round trip, not two. Where the numbering reads the
    // failover gate itself (gated) only: elsewhere its fence comes from a read this attempt has
    // not made yet. A busy key, a lock statement that failed or came too late numbers nothing
    // (the proof decides), and core numbers after the grant as before. Only at a distance, told
    // by the lock session's handshake (two round trips and more) taking 2 * chain_from: on
    // loopback the numbering's thread, its wait and its block cost more than the round trip they
    // save (paired runs 1.02-1.09x as long, docs/performance.md), and the path there is main's.
    if (!again && wait.count() <= 0 && chainable && gated && lock_->holder().chains_first() &&
        lock_->holder().handshake() >= 2 * chain_from)
      chained = take_params(req, Value(), Value()).set("poll_ms", static_cast<std::int64_t>(first_poll.count()));
    auto got = take();
    if (!got && got.error().kind == ErrorKind::connection) {
      // Nothing is held yet, so a holder session that is gone (the server's idle limit passed
      // while a waiter slept until --min-interval was due) is simply replaced, once.
      if (auto ok = lock_->reopen(); !ok) return std::unexpected(ok.error());
      got = take();
    }
    // The take's own gate opened only on the session the handshake gave (:started_id): the
    // session is served directly, as the record's read apart would have found it (failover.cpp),
    // so its statements may be named (the release's, made ready while the command runs).
    if (fold_gated && got && lock_->gate_opened()) book_->served_directly_seen();
    if (fold_gated && got && lock_->gate_unread()) {
      // The take's own gate did not open, and it took nothing: the gate read apart (it may write
      // the record), and taken again once it is open.
      if (!admit()) return shut();
      got = take();
    }
    if (overlap && !gated && !admit()) {
      if (got && *got) (void)lock_->give_back(req.key);
      return shut();
    }
    if (!got) return std::unexpected(got.error());
    // Who holds the key, where the take's own answer said: a folded take's, or a refused first
    // attempt's whose numbering went with it (the key's row, read by the wait ahead of it).
    std::optional<Rows> chained_refusal;
    auto answered = [&]() -> const Rows* {
      if (fold) return lock_->refusal();
      if (chained && got && !*got)
        if (auto r = lock_->holder().refusal_read()) chained_refusal = std::move(r);
      return chained_refusal ? &*chained_refusal : nullptr;
    };
    if (!*got && wait.count() == 0 && !probe) {
      // Refused with no holder to show: a competitor between its server lock and its row, or
      // on a table just made, another process's CREATE TABLE IF NOT EXISTS, whose metadata lock
      // MariaDB's NOWAIT reads as a lock wait (1205) too. Asked once more after a moment, the
      // server lock decides again; a refusal then stands (e2e.*.new_keys_at_once).
      auto first = busy(req, answered());
      if (!first || first->holder) return first;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      got = take();
      if (!got) return std::unexpected(got.error());
    }
    if (!*got) return busy(req, answered());
    std::optional<Rows> proven;  // the chained numbering's row
    if (chained)
      if (auto n = lock_->holder().numbered(); n && *n && took_row(**n)) proven = std::move(**n);
    if (proven) gate_unread_ = false;  // its own gate opened (gated): no number() after it
    auto out = fold      ? numbered(req, **got)
               : proven ? numbered(req, *proven)
                        : number(req, gated ? 0 : (*gate)->fence, gated);
    if (gated && out && gate_unread_) {
      // The numbering's own gate answered no row: read now (it may write the record), and the
      // row numbered again once it is open.
      if (!admit()) {
        (void)lock_->give_back(req.key);
        return shut();
      }
      out = number(req, (*gate)->fence, false);
    }
    if (!out || out->state != AcquireOutcome::State::acquired) (void)lock_->give_back(req.key);
    else held_ = HeldRun{{req.key, req.owner, req.host, req.pid, out->token}, req, out->acquired_at_ms.value_or(0)};
    folds_release_ = req.semaphore.empty() && lock_->folds_release();
    return out;
  }

  // LeaseStatements::release's parameters for the lock held (release_row's).
  Params release_params(const ReleaseRequest& req) const {
    return {{"key", held_->key},
            {"owner", held_->owner},
            {"token", held_->token},
            {"min_hold_ms", ms_value(req.min_hold)},
            {"finished", std::int64_t{req.finished_run ? 1 : 0}},
            {"exit_code", value_of(req.exit_code)}};
  }

  // Whether release() folds the row, the unlock (or a row lock's proof) and the history row into
  // one statement: a plain key where the dialect has it (ServerLock::folds_release), its history
  // row kept and not one a history of none would trim at once (records_with_release).
  bool folds_release(const ReleaseRequest& req) const {
    return folds_release_ && req.history && records_with_release(st_, *held_, req, keep_);
  }

  // session_take's parameters (statements.hpp).
  Params take_params(const LockRequest& req, const Value& fence, const Value& token) const {
    Params p{{"key", req.key},
             {"strategy", strategy_},
             {"session_id", lock_->holder().session_id()},
             {"min_interval_ms", ms_value(req.min_interval)},
             {"token", token},
             {"fence", fence},
             {"record", std::string(failover::record_name)},
             {"ttl_ms", ms_value(req.ttl)},
             // The session as the handshake gave it, until the gate was read on it (admit_once).
             {"started_id", admitted_ ? Value() : Value(book_->started_id())}};
    return rows::bind_holder(p, req);
  }

  // The row of a key whose server lock is ours: a plain lock's in one statement; a semaphore's
  // slot with its header, in one transaction (docs/backend-contract.md "Semaphores").
  // `gated`: session_take reads the gate itself (gated_); no row from it is busy with no holder,
  // and gate_unread_ says so.
  Result<AcquireOutcome> number(const LockRequest& req, std::int64_t fence, bool gated) {
    gate_unread_ = false;
    std::optional<Transaction> tx;
    Value token;
    if (!req.semaphore.empty()) {
      auto begun = Transaction::begin(*book_, st_.begin);
      if (!begun) return std::unexpected(begun.error());
      tx.emplace(std::move(*begun));
      auto header = take_header(*book_, st_, req, fence);
      if (!header) return std::unexpected(header.error());
      if (!header->token) return header->refusal;
      token = *header->token;
    }
    auto took = book_->run(st_.session_take, take_params(req, fence, token));
    if (!took) return std::unexpected(took.error());
    if (gated && took->empty()) {
      gate_unread_ = true;
      AcquireOutcome out;
      out.state = AcquireOutcome::State::busy;
      return out;
    }
    auto out = numbered(req, *took);
    if (out && out->state == AcquireOutcome::State::acquired && tx)
      if (auto ok = tx->commit(); !ok) return std::unexpected(ok.error());
    return out;
  }

  // What session_take answered (`took`), the server lock ours: held from now on, or refused.
  Result<AcquireOutcome> numbered(const LockRequest& req, const Rows& took) {
    // Not taken with the server lock ours: a semaphore's header, --min-interval's not yet, a
    // --min-hold still running, or another strategy's holder (refused: the server lock goes back).
    // A take that answers with its row whether or not it took it (MariaDB's) says which by its token.
    if (!took_row(took)) return refused(*book_, st_, req, nullptr, strategy_);
    // A plain key's row read back, its wake primitive may do hold()'s work with it (Wake::reading_taken).
    return acquired(*book_, st_, took, req, req.semaphore.empty() ? &lock_->holder().release_signal() : nullptr);
  }

  // Someone else has the server lock: busy, with the row's holder for -v (best effort), from
  // the take's own answer where it said (`answered`: ServerLock::refusal()), else read.
  Result<AcquireOutcome> busy(const LockRequest& req, const Rows* answered = nullptr) {
    AcquireOutcome out;
    out.state = AcquireOutcome::State::busy;
    if (!answered && !req.describe_holder) return out;  // not asked: it would be a read of its own
    LockRequest plain = req;
    plain.min_interval = Millis(0);  // the lock is busy, whatever --min-interval says
    auto row = refused(*book_, st_, plain, answered, {}, numbered_columns);
    if (row && row->holder) {
      out.holder = std::move(row->holder);
      out.holder->state = LockStatus::State::held;
    }
    return out;
  }

  // How long the bookkeeping session takes to answer a statement that does nothing (lock.alive),
  // once it has run another: a round trip, the server's own time almost none. The quickest of up
  // to three, fewer once one is under chain_from: a loaded machine's moment (a process not yet
  // scheduled) passes for no distance. 0 when one failed (the next statement says why).
  std::chrono::microseconds timed_round_trip() {
    auto quickest = std::chrono::microseconds::max();
    for (int i = 0; i < 3 && quickest >= chain_from; ++i) {
      const auto sent = std::chrono::steady_clock::now();
      if (!book_->run(lock_->statements().alive, Params())) return std::chrono::microseconds(0);
      quickest = std::min(quickest, std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - sent));
    }
    return quickest;
  }

  std::unexpected<Error> lost(const std::string& what) const {
    return fail(ErrorKind::lost, "the " + strategy_ + " lock on '" + held_->key + "' (token " +
                                     std::to_string(held_->token) + ") " + what);
  }

  std::string strategy_;
  std::unique_ptr<ServerLock> lock_;
  std::shared_ptr<Session> book_;
  LeaseStatements st_;
  std::string prefix_;
  int keep_;
  std::optional<HeldRun> held_;
  std::optional<failover::Admitted> admitted_;  // the failover gate found open on book_
  bool take_prepared_ = false;                  // session_take made ready for a waiter (attempt)
  bool waited_once_ = false;                    // an attempt that may wait was made (attempt)
  bool folds_release_ = false;                  // the lock held is released in one statement (release)
  bool gated_ = session_take_reads_gate(st_);  // session_take reads the failover gate (attempt)
  bool gate_unread_ = false;                    // number()'s gated take answered no row
  bool numbered_gated_ = numbered_take_reads_gate(lock_->statements());  // attempt's fold_gated
  bool numbering_gated_ = numbering_reads_gate(lock_->statements());    // row_numbered reads the gate (attempt)
  failover::ReadCheck serving_;                 // make_session_locker's `serving`
  // A row-lock waiter's numbering goes chained to its grant (attempt) only where a round trip
  // costs more than that numbering's proof does in the server: PostgreSQL's reads the server's
  // lock table, which every waiter's locks fill. At a 10 ms round trip that is one round trip
  // less a handoff; 100 waiters on loopback handed off 0.82-0.95x as fast chained
  // (docs/performance.md). MariaDB's proof is one named lock's holder, but its chaining costs a
  // thread and the gate's round trips: the same threshold.
  static constexpr std::chrono::microseconds chain_from{1000};
  // How long a first attempt's chained numbering waits in the server for its proof: the lock
  // statement, sent at the same moment on the other session, is granted within a few
  // milliseconds of the numbering's arrival (both travel as far); a key busy shows its holder
  // at once and ends the wait. Past it, core numbers after the grant (one round trip more).
  static constexpr std::chrono::milliseconds first_poll{20};
  std::optional<std::chrono::microseconds> round_trip_;  // timed_round_trip(), once a waiter found the key busy
  bool retime_ = false;              // round_trip_ was timed on a session just made: once more after a wait
  bool numbering_prepared_ = false;  // row_numbered made ready (once round_trip_ said far)
};

}  // namespace

std::unique_ptr<Locker> make_session_locker(Strategy strategy, std::unique_ptr<HolderSession> holder,
                                            const LockStatements& lock, std::shared_ptr<Session> book,
                                            const LeaseStatements& statements, std::string prefix, int keep,
                                            failover::ReadCheck serving) {
  return std::make_unique<SessionLocker>(strategy, std::move(holder), lock, std::move(book), statements,
                                         std::move(prefix), keep, std::move(serving));
}

}  // namespace dblock::sql

#pragma once
// The session strategies (advisory, for-update, txn-insert), once for every backend: the lock
// is the server's, held by one database session (the holder), and dies with it. Around it this
// file owns every decision: the token, numbered in <prefix>locks on the bookkeeping session
// (autocommit, so a holder killed mid-transaction cannot roll back a token it was given), the
// semaphore header, --min-interval, the release and its history row, schema repair and what a
// dead session means, and the server lock itself: which statement takes, proves and gives it
// back, and what a busy or failed one leaves. The dialect supplies only its holder session
// (HolderSession) and its statements (statements.hpp).

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "core/locker.hpp"
#include "core/sql/failover.hpp"
#include "core/sql/statements.hpp"

namespace dblock::sql {

/// A session strategy's holder session, as its dialect opens it: the one part each dialect
/// writes. What to run in it and what the answers mean is the locker's (LockStatements).
class HolderSession {
 public:
  virtual ~HolderSession() = default;

  /// Runs `st`, which may wait for a lock up to `wait` on top of the I/O timeout.
  virtual Result<Rows> run(const Statement& st, const Params& params, Millis wait) = 0;
  /// run() in two halves, so the locker can wait on its bookkeeping session in between: send()
  /// sends `st` (a dialect may only keep it: then answer() runs it), answer() reads its answer;
  /// nothing else runs in the session between them.
  virtual Result<void> send(const Statement& st, const Params& params, Millis wait) {
    sent_ = Sent{st, params, wait};
    return {};
  }
  virtual Result<Rows> answer() {
    if (!sent_) return fail(ErrorKind::internal, "no lock statement was sent");
    const Sent s = std::move(*sent_);
    sent_.reset();
    return run(s.st, s.params, s.wait);
  }
  /// send() of txn-insert's INSERT, which the holder tag follows (LockStatements::tag): it
  /// answers only by its error (inserted: its one row), so a dialect may keep it and send it
  /// ahead of the tag, in the tag's round trip; answer() then says affected 1 and the tag's run
  /// reports the INSERT's error.
  virtual Result<void> send_before_tag(const Statement& st, const Params& params, Millis wait) {
    return send(st, params, wait);
  }
  /// What send() sent is not wanted after all: whatever it took goes back with the transaction,
  /// which the caller then ends. Kept only, it is dropped; `waits` (it may wait for the lock): a
  /// dialect that sent it may close the session instead of waiting for its answer.
  virtual void withdraw(bool waits) {
    (void)waits;
    sent_.reset();
  }
  /// send() of a row lock's statement `st` that, where the dialect can, also sends `number`
  /// (LockStatements::row_numbered, with `np`, and, where its proof is the holder tag's holder,
  /// :held and :lock_session of this session) on the bookkeeping session, to run in the server
  /// once `st` has taken the lock, with no round trip through the client between them: the
  /// statement proves the grant itself, so it numbers nothing when it runs too early or the
  /// holder's session is gone. `before_tag`: `st` is txn-insert's INSERT, sent as
  /// send_before_tag sends it, and the lock is taken once the tag that follows has run. Its
  /// answer: numbered(). Default: only `st` is sent. A first attempt's (`np` carries a :poll_ms
  /// above 0: core sends it only where LockStatements::grant_wait is given) goes behind
  /// grant_wait, with no gate of the lock session's ahead of it (a round trip of its own): it
  /// waits in the server for its proof within :poll_ms, so which of the two sessions' statements
  /// reaches the server first decides nothing.
  virtual Result<void> send_numbering(const Statement& st, const Params& p, Millis wait, const Statement& number,
                                      const Params& np, bool before_tag) {
    (void)number;
    (void)np;
    return before_tag ? send_before_tag(st, p, wait) : send(st, p, wait);
  }
  /// What send_numbering's `number` answered, read by answer() (with `before_tag`, by the tag's
  /// run()) or withdraw() (which leave no statement of it pending, and end the lock statement's
  /// transaction when it took nothing); nullopt: none was sent with the last lock statement.
  virtual std::optional<Result<Rows>> numbered() { return std::nullopt; }
  /// What the wait ahead of a first attempt's numbering (LockStatements::grant_wait) answered,
  /// read with numbered(): the key's row as lease.refusal reads it, after its first four
  /// columns; nullopt: none was sent, or it did not answer.
  virtual std::optional<Rows> refusal_read() { return std::nullopt; }
  /// How long the session's handshake took (two round trips at the least), 0 where unknown: a
  /// distance told without a statement of its own.
  virtual std::chrono::microseconds handshake() const { return std::chrono::microseconds(0); }
  /// The lock statement sent next (send; txn-insert's, the tag that follows send_before_tag) goes
  /// behind `ahead` with `params` (Waiters::ahead's wait), in its round trip: a dialect whose
  /// release_signal() offers such a wait (Wake::wait_ahead) runs the two as one. What the wait
  /// told is then told(); a closed session sends nothing behind (untold).
  virtual void send_behind(const Statement& /*ahead*/, const Params& /*params*/) {}
  /// What the wait that the last lock statement went behind told (AheadAnswer::untold: none, or
  /// its answer was lost), even when the lock statement itself then failed.
  virtual AheadAnswer told() const { return AheadAnswer::untold; }
  /// Runs SQL without parameters (ROLLBACK).
  virtual Result<void> exec(std::string_view sql) = 0;
  /// Ends a refused lock's transaction, which holds nothing, with ROLLBACK sent ahead of what
  /// the session runs next (a preparation, the next begin and its lock statement), in that
  /// statement's round trip, where the dialect can: the server runs them in order, nothing after
  /// a ROLLBACK that failed runs, and that failure closes the session (the next statement reports
  /// it). By default it runs now, as exec.
  virtual Result<void> rollback_ahead() { return exec("ROLLBACK"); }
  /// Opens the transaction that holds a row lock (`st.begin`), its lock wait `wait` (server_wait's)
  /// set by `st.lock_wait` with `p` (bind's parameters) where the dialect keeps it: for the
  /// transaction just begun, or for the session before it begins, only when it changed. A
  /// dialect may send it with the statement that follows (the lock), in its round trip: that
  /// statement's run then reports its errors.
  virtual Result<void> begin(const LockStatements& st, const Params& p, Millis wait) = 0;
  /// The server lock on `key` was just taken, the row not yet numbered (or, folded, with it):
  /// `answer` is what the statement that took it answered last (the advisory take, a row lock's
  /// lock statement, or its `tag` after it). The dialect sets up what its holding needs there.
  /// An error fails the take, as the lock statement's would (core gives the lock back).
  virtual Result<void> holding(const std::string& /*key*/, const Rows& /*answer*/) { return {}; }
  /// The key's claims row was inserted (LockStatements::make_claim; `made`: it ran without
  /// error) so that it can be locked: a dialect whose session does not commit on its own commits
  /// it here, or ends what a failed one left open. An error is the insert's.
  virtual Result<void> claim_made(bool /*made*/) { return {}; }
  /// Runs `st` and then ends the transaction with COMMIT, which it skips when `st` failed (the
  /// transaction then stays open, failed, until ROLLBACK); `st`'s answer. A dialect may send both
  /// in one round trip.
  virtual Result<Rows> run_and_commit(const Statement& st, const Params& params) {
    auto r = run(st, params, Millis(0));
    if (!r) return r;
    if (auto c = exec("COMMIT"); !c) return std::unexpected(c.error());
    return r;
  }
  /// Makes `st` ready to run later in this session (as Session::prepare), where it will run
  /// inside the lock's transaction; called only while no transaction is open. Best effort: a
  /// dialect that cannot, or whose preparation failed, runs it as it would have.
  virtual void prepare(const Statement& /*st*/) {}
  /// The same while the lock's transaction is open (the release that ends it, made ready while
  /// the command runs), only where that costs no round trip now; whatever the preparation
  /// meets, the transaction and its lock stay as they were.
  virtual void prepare_held(const Statement& /*st*/) {}
  /// Closes the session: whatever it held is gone with it.
  virtual void close() = 0;
  /// Opens the session anew, its lock wait none; only called while nothing is held.
  virtual Result<void> reopen() = 0;
  /// Whether a transaction is open in it, healthy or failed.
  virtual bool transaction_open() const = 0;
  /// What <prefix>locks.session_id records for the holder, which status and `release --force`
  /// ask the server about (valid after a take).
  virtual std::string session_id() const = 0;
  /// The session's socket (core watches it), or -1 when closed or lost.
  virtual int socket() const = 0;
  /// The wait the server can honour of `wait` (>= 0): within a statement's bound and, for a row
  /// lock (`row`), in the steps the server waits in.
  virtual Millis server_wait(Millis wait, bool row) const = 0;
  /// Adds the dialect's own parameters of `key` and `wait` (server_wait's) to `p`.
  virtual void bind(Params& p, const std::string& key, Millis wait) const = 0;
  /// How a waiter hears a release when the server waited less than asked, or one that never
  /// tells; one on a connection uses the bookkeeping session's (the locker remakes it).
  virtual Waiters& release_signal() = 0;

 private:
  struct Sent {
    Statement st;
    Params params;
    Millis wait;
  };
  std::optional<Sent> sent_;  // send()'s, until answer()
};

/// The locker of `strategy` (a session strategy): the server lock in `holder` with `lock`, the
/// token and history on `book` (which may be the holder's own session when the lock is held
/// outside a transaction) with `statements`. `prefix` is the table prefix (release_channel),
/// `keep` the history rows kept per key. `serving`, when set, judges the failover record's read
/// on `book` before the first take on each of its connections (SqlBackend::serving_check).
std::unique_ptr<Locker> make_session_locker(Strategy strategy, std::unique_ptr<HolderSession> holder,
                                            const LockStatements& lock, std::shared_ptr<Session> book,
                                            const LeaseStatements& statements, std::string prefix, int keep,
                                            failover::ReadCheck serving = {});

}  // namespace dblock::sql

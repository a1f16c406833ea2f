#include "core/sql/session_locker.hpp"

#include <utility>

#include "core/sql/lease_locker.hpp"
#include "core/sql/lock_steps.hpp"

namespace dblock::sql {
namespace {

class SessionLocker final : public Locker {
 public:
  SessionLocker(Strategy strategy, std::unique_ptr<SessionLock> lock, std::shared_ptr<Session> book,
                const LeaseStatements& statements, std::string prefix, int keep)
      : strategy_(to_string(strategy)), lock_(std::move(lock)), book_(std::move(book)), st_(statements),
        prefix_(std::move(prefix)), keep_(keep) {}

  // The server frees a dropped session's locks only once it has processed the disconnect, and
  // status must not lag: the lock goes back before the connection closes.
  ~SessionLocker() override {
    if (held_) (void)lock_->give_back(held_->key);
  }

  // One attempt, and more while the dialect hears of a release within `wait`.
  Result<AcquireOutcome> try_acquire(const LockRequest& req, Millis wait) override {
    if (held_) return fail(ErrorKind::internal, "this locker already holds " + held_->key);
    auto out = until_not_busy(lock_->release_signal(), req, wait,
                              [&](Millis left) { return with_schema(*book_, [&] { return attempt(req, left); }); });
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
    const ReleaseRow what{.held = *held_, .strategy = strategy_, .write_history = false};
    admitted_.reset();  // the release may reconnect
    ReleaseRequest r = req;
    r.min_hold = Millis(0);  // core keeps a session lock for --min-hold itself
    // The bookkeeping session holds no lock, so a statement lost with its connection runs again.
    auto released = with_retry(*book_, [&] { return with_schema(*book_, [&] { return release_row(*book_, st_, what, r, prefix_, keep_); }); });
    // The server lock is what excludes: given back, it was held to the end. The row alone may
    // say otherwise when a first try of its release ran but the reply was lost (a read timeout on
    // a loaded server): with_retry ran it again and found it released already, by that try.
    auto gave_back = lock_->give_back(held_->key);
    lock_->release_signal().released(signal_key(held_->request));
    Result<void> history{};
    if (released)
      history = with_retry(*book_, [&] {
        return with_schema(*book_, [&] { return record_held_run(*book_, st_, *held_, strategy_, gave_back.has_value(), r, keep_); });
      });
    auto message = lost("was already gone at release" +
                        (gave_back ? std::string() : ": " + gave_back.error().message));
    const std::string key = held_->key;
    held_.reset();
    if (!released) return std::unexpected(released.error());
    if (!history)
      return fail(history.error().kind,
                  "released '" + key + "', but its run's history row was not written: " + history.error().message);
    if (!gave_back) return message;
    return {};
  }

  int session_fd() const override { return held_ ? lock_->socket() : -1; }
  int wakeup_fd() const override { return lock_->release_signal().fd(); }
  void consume_wakeup() override { lock_->release_signal().consume(); }

 private:
  // The server lock, then the row numbered on the bookkeeping session. Whatever stops the
  // attempt gives the server lock back: no lock is left behind, no transaction open.
  Result<AcquireOutcome> attempt(const LockRequest& req, Millis wait) {
    // The failover gate (failover.hpp) first: a holder whose session was on the old primary
    // notices within its TTL that the session is gone, as a lease holder that cannot renew.
    auto gate = failover::admit_once(*book_, st_.failover, admitted_, req.ttl);
    if (!gate) return std::unexpected(gate.error());
    if (!gate->open) return failover::delayed(*gate);
    // A plain lock is numbered in the statement that takes it where the dialect folds the two;
    // a semaphore's slot never is (its header comes first, in a transaction).
    const bool fold = lock_->folds_row() && req.semaphore.empty();
    auto take = [&]() -> Result<std::optional<Rows>> {
      if (!fold) {
        auto got = lock_->take(req.key, wait);
        if (!got) return std::unexpected(got.error());
        return *got ? std::optional<Rows>(Rows()) : std::nullopt;
      }
      auto got = lock_->take_numbered(req.key, wait, take_params(req, gate->fence, Value()));
      if (!got) return std::unexpected(got.error());
      return got->taken ? std::optional<Rows>(std::move(got->numbered)) : std::nullopt;
    };
    auto got = take();
    if (!got && got.error().kind == ErrorKind::connection) {
      // Nothing is held yet, so a holder session that is gone (the server's idle limit passed
      // while a waiter slept until --min-interval was due) is simply replaced, once.
      if (auto ok = lock_->reopen(); !ok) return std::unexpected(ok.error());
      got = take();
    }
    if (!got) return std::unexpected(got.error());
    if (!*got) return busy(req);
    auto out = fold ? numbered(req, **got) : number(req, gate->fence);
    if (!out || out->state != AcquireOutcome::State::acquired) (void)lock_->give_back(req.key);
    else held_ = HeldRun{{req.key, req.owner, req.host, req.pid, out->token}, req, out->acquired_at_ms.value_or(0)};
    return out;
  }

  // session_take's parameters (statements.hpp).
  Params take_params(const LockRequest& req, std::int64_t fence, const Value& token) const {
    return {{"key", req.key},
            {"owner", req.owner},
            {"host", req.host},
            {"pid", req.pid},
            {"strategy", strategy_},
            {"session_id", lock_->session_id()},
            {"min_interval_ms", ms_value(req.min_interval)},
            {"token", token},
            {"fence", fence}};
  }

  // The row of a key whose server lock is ours: a plain lock's in one statement; a semaphore's
  // slot with its header, in one transaction (docs/backend-contract.md "Semaphores").
  Result<AcquireOutcome> number(const LockRequest& req, std::int64_t fence) {
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
    auto out = numbered(req, *took);
    if (out && out->state == AcquireOutcome::State::acquired && tx)
      if (auto ok = tx->commit(); !ok) return std::unexpected(ok.error());
    return out;
  }

  // What session_take answered (`took`), the server lock ours: held from now on, or refused.
  Result<AcquireOutcome> numbered(const LockRequest& req, const Rows& took) {
    // Not taken with the server lock ours: a semaphore's header, or --min-interval's not yet.
    if (took.affected == 0) return refused(*book_, st_, req);
    return acquired(*book_, st_, took, req);
  }

  // Someone else has the server lock: busy, with the row's holder for -v (best effort).
  Result<AcquireOutcome> busy(const LockRequest& req) {
    AcquireOutcome out;
    out.state = AcquireOutcome::State::busy;
    LockRequest plain = req;
    plain.min_interval = Millis(0);  // the lock is busy, whatever --min-interval says
    auto row = refused(*book_, st_, plain);
    if (row && row->holder) {
      out.holder = std::move(row->holder);
      out.holder->state = LockStatus::State::held;
    }
    return out;
  }

  std::unexpected<Error> lost(const std::string& what) const {
    return fail(ErrorKind::lost, "the " + strategy_ + " lock on '" + held_->key + "' (token " +
                                     std::to_string(held_->token) + ") " + what);
  }

  std::string strategy_;
  std::unique_ptr<SessionLock> lock_;
  std::shared_ptr<Session> book_;
  LeaseStatements st_;
  std::string prefix_;
  int keep_;
  std::optional<HeldRun> held_;
  std::optional<failover::Admitted> admitted_;  // the failover gate found open on book_
};

}  // namespace

Result<SessionLock::NumberedTake> SessionLock::take_numbered(const std::string&, Millis, const Params&) {
  return fail(ErrorKind::internal, "this session lock does not number the row itself");
}

std::unique_ptr<Locker> make_session_locker(Strategy strategy, std::unique_ptr<SessionLock> lock,
                                            std::shared_ptr<Session> book, const LeaseStatements& statements,
                                            std::string prefix, int keep) {
  return std::make_unique<SessionLocker>(strategy, std::move(lock), std::move(book), statements, std::move(prefix),
                                         keep);
}

}  // namespace dblock::sql

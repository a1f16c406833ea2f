#include "core/sql/lease_locker.hpp"

#include <utility>

#include "core/sql/lock_rows.hpp"
#include "core/sql/lock_steps.hpp"

namespace dblock::sql {
namespace {

class LeaseLocker final : public Locker {
 public:
  LeaseLocker(std::shared_ptr<Session> session, const LeaseStatements& statements, std::string prefix, int keep)
      : session_(std::move(session)),
        st_(statements),
        prefix_(std::move(prefix)),
        keep_(keep),
        take_reads_gate_(sql::take_reads_gate(st_)),
        release_tells_(sql::release_tells(st_)) {}

  // One attempt, and more while the dialect hears of a release within `wait` (or at once).
  Result<AcquireOutcome> try_acquire(const LockRequest& req, Millis wait) override {
    if (held_) return fail(ErrorKind::internal, "this locker already holds " + held_->key);
    bool again = false;
    auto out = until_not_busy(session_->release_signal(), req, wait, [&](Millis left) {
      // A waiter's next take is what a release lets run (take() may send it behind a wait in
      // the server for the holder's handoff), and its parse would then be part of the
      // handoff: made ready now, ahead of that wait (a dialect names it once per connection).
      if (std::exchange(again, true)) session_->prepare(st_.take);
      session_->release_signal().attempting(left);
      return with_schema(*session_, [&] { return attempt(req); });
    });
    // A connection lost in a take or in the wait for a release is made again for the next
    // attempt, here and nowhere else: the new one may reach another server, so its failover
    // gate is read again.
    if (!out && out.error().kind == ErrorKind::connection) {
      admitted_.reset();
      (void)session_->reconnect(out.error());
    }
    return out;
  }

  Result<void> renew(Millis ttl) override {
    if (!held_ || lost_) return fail(ErrorKind::lost, "no lease is held, so there is nothing to renew");
    admitted_.reset();
    const FailoverStatements& fo = st_.failover;
    const Params p{{"key", held_->key},
                   {"owner", held_->owner},
                   {"token", held_->token},
                   {"ttl_ms", ms_value(ttl)},
                   {"record", std::string(failover::record_name)}};
    // A renewal on a new primary (a failover the grant survived) starts the lock-delay, so that
    // it ends one TTL after the promotion was first seen rather than after this holder lets go
    // (failover::notice). A renewal that says so costs nothing more; one that cannot tell is
    // followed by a read of the record once a lost connection was made again, as takes are.
    auto r = with_retry(*session_, [&]() -> Result<Rows> {
      auto renewed = session_->run(st_.renew, p);
      if (!renewed) {
        reconnected_ = renewed.error().kind == ErrorKind::connection;
        return renewed;
      }
      if (reconnected_ && !renewal_tells(*renewed))
        if (auto seen = failover::notice(*session_, fo, ttl); !seen) return std::unexpected(seen.error());
      reconnected_ = false;
      return renewed;
    });
    if (!r) return std::unexpected(r.error());
    if (r->affected == 0) {
      // Kept (not reset): release() still writes this run's history row.
      lost_ = true;
      return lost("is no longer held by " + held_->owner + ": it expired and was taken, or was released");
    }
    if (renewed_on_new_incarnation(*r))
      if (auto seen = with_retry(*session_, [&] { return failover::notice(*session_, fo, ttl); }); !seen)
        return std::unexpected(seen.error());
    return {};
  }

  Result<void> release(const ReleaseRequest& req) override {
    if (!held_) return fail(ErrorKind::lost, "no lease is held, so there is nothing to release");
    admitted_.reset();
    // Until the release has committed the lease is still ours: a release that failed leaves
    // it held, to be retried or left to expire.
    int tries = 0;
    auto released = with_retry(*session_, [&]() -> Result<bool> {
      if (tries++ > 0 && !lost_) {
        auto done = released_by_us();
        if (!done) return std::unexpected(done.error());
        if (*done) return true;
      }
      return with_schema(*session_, [&] { return release_once(req); });
    });
    if (!released) return std::unexpected(released.error());
    session_->release_signal().released(signal_key(held_->request));
    // Written after the release has woken the waiters (release_tells), or with it.
    auto history = release_tells_ && !history_with_release(req)
                       ? record_held_run(*session_, st_, *held_, "lease", *released, req, keep_)
                       : Result<void>{};
    const bool was_lost = lost_;
    auto message = lost(was_lost ? "was lost before it was released"
                                 : "was no longer held by " + held_->owner + " when it was released");
    held_.reset();
    lost_ = false;
    if (!history) return history;
    if (!*released) return message;
    return {};
  }

  // Off the command's start: what the wake primitive left for later (waiters.hpp, settle), and
  // the release, which the next waiter waits for, parsed now rather than in the handoff; only
  // where that costs no round trip (a short command may have ended already).
  void prepare_release() override {
    session_->release_signal().settle();
    if (!held_ || lost_ || !held_->request.semaphore.empty()) return;
    session_->prepare_unasked(keep_ > 0 && !st_.release_recorded.empty() ? st_.release_recorded : st_.release);
  }

  int wakeup_fd() const override { return session_->release_signal().fd(); }
  void consume_wakeup() override { session_->release_signal().consume(); }

 private:
  Params take_params(const LockRequest& req, const Value& token, std::int64_t fence) const {
    Params p{{"key", req.key},     {"ttl_ms", ms_value(req.ttl)}, {"min_interval_ms", ms_value(req.min_interval)},
             {"token", token},     {"record", std::string(failover::record_name)}, {"fence", fence}};
    return rows::bind_holder(p, req);
  }

  Result<AcquireOutcome> attempt(const LockRequest& req) {
    if (!req.semaphore.empty()) return attempt_slot(req);
    const FailoverStatements& fo = st_.failover;
    std::int64_t fence = 0;
    if (!take_reads_gate_) {
      auto gate = failover::admit_once(*session_, st_.failover, admitted_, req.ttl);
      if (!gate) return std::unexpected(gate.error());
      if (!gate->open) return failover::delayed(*gate);
      fence = gate->fence;
    }
    Params p = take_params(req, Value(), fence);
    auto took = take(req.key, p);
    if (!took) return std::unexpected(took.error());
    if (!took_row(*took) && take_reads_gate_) {
      // A refusal the take explains by a live holder or by --min-interval stands: the gate
      // could only refuse as well. So a contender of a start storm costs the server one
      // statement. Not on a new incarnation, below.
      const bool new_incarnation = took_on_new_incarnation(*took);
      if (take_explained(*took) && !new_incarnation) {
        auto why = refused(*session_, st_, req, &*took, "lease");
        if (!why || why->state == AcquireOutcome::State::not_due ||
            (why->holder && why->holder->state == LockStatus::State::held))
          return why;
      }
      // Otherwise the take's own gate may have refused rather than a holder: no record yet, a
      // record of another primary (a failover: even behind a live holder, whose grant the new
      // primary has, this first contact starts the lock-delay, so that it ends one TTL after
      // the promotion was first seen), or a TTL longer than any recorded. Asked once
      // per connection (admit_once): a waiter every release wakes is refused by the holder
      // again and again, and on the server of one connection the record stays open.
      // A pooler's connection outlives its server: what it found open is past.
      if (new_incarnation) admitted_.reset();
      const bool asked = !admitted_ || admitted_->ttl < req.ttl;  // the record is read now
      auto gate = failover::admit_once(*session_, fo, admitted_, req.ttl);
      if (!gate) return std::unexpected(gate.error());
      if (!gate->open) return failover::delayed(*gate);
      // Taken again once the record was read, whether or not this gate wrote it: another
      // process may have covered the TTL between the take and the read (two new keys started
      // at once), and then the take's refusal was the gate's, not a holder's.
      if (asked) took = take(req.key, p);
      if (!took) return std::unexpected(took.error());
    }
    if (!took_row(*took)) return refused(*session_, st_, req, &*took, "lease");
    return taken(req, *took);
  }

  // A semaphore's slot: its header, then the slot row with the header's token, in one
  // transaction (docs/backend-contract.md "Semaphores"); a slot not taken rolls the header back.
  // The failover gate goes first, outside the transaction: what it records must stay.
  Result<AcquireOutcome> attempt_slot(const LockRequest& req) {
    auto gate = failover::admit_once(*session_, st_.failover, admitted_, req.ttl);
    if (!gate) return std::unexpected(gate.error());
    if (!gate->open) return failover::delayed(*gate);
    auto tx = Transaction::begin(*session_, st_.begin);
    if (!tx) return std::unexpected(tx.error());
    auto header = take_header(*session_, st_, req, gate->fence);
    if (!header) return std::unexpected(header.error());
    if (!header->token) return header->refusal;
    Params p = take_params(req, *header->token, gate->fence);
    auto took = take(req.key, p, false);
    if (!took) return std::unexpected(took.error());
    if (!took_row(*took)) return refused(*session_, st_, req, &*took, "lease");
    auto out = taken(req, *took);
    if (!out) return out;
    if (auto ok = tx->commit(); !ok) {
      held_.reset();
      return std::unexpected(ok.error());
    }
    return out;
  }

  // The take of `key` with `p` (`alone`: outside a transaction). At the head of the key's
  // waiters it goes behind a wait in the server for the holder's handoff, in one round trip
  // (Waiters::ahead, Session::run_behind): the release that ends the holder's handoff lets it
  // run at once, so the waiter's command starts a round trip after the holder's ends, where
  // hearing the release and then taking was two. The wait lasts at most what is left of the
  // attempt's slice, and the take runs after it either way: its row decides. The wake primitive
  // adds what it hands the key over with, and hears what the take answered.
  Result<Rows> take(const std::string& key, Params& p, bool alone = true) {
    Waiters& waiters = session_->release_signal();
    Params wait;
    Millis bound{0};
    const Statement* ahead = waiters.ahead(key, p, alone, wait, bound);
    AheadAnswer answer = AheadAnswer::untold;
    auto took = ahead ? session_->run_behind(*ahead, wait, st_.take, p, bound, answer) : session_->run(st_.take, p);
    if (took) waiters.took(key, *took);
    if (ahead) waiters.behind(key, answer, took && took_row(*took), took.has_value());
    return took;
  }

  Result<AcquireOutcome> taken(const LockRequest& req, const Rows& took) {
    auto out = acquired(*session_, st_, took, req);
    if (out) held_ = HeldRun{{req.key, req.owner, req.host, req.pid, out->token}, req, out->acquired_at_ms.value_or(0)};
    return out;
  }

  // The release, and the run's history row in the same transaction unless the release commits
  // alone without a disk wait (release()). true: the lease was still ours.
  Result<bool> release_once(const ReleaseRequest& req) {
    const ReleaseRow what{.held = *held_,
                          .strategy = "lease",
                          .write_row = !lost_,
                          .write_history = !release_tells_ || history_with_release(req)};
    return release_row(*session_, st_, what, req, prefix_, keep_);
  }

  // Whether release_row writes the history row in the release's own statement
  // (release_recorded): the one round trip of a release, whose waiters wake at its commit.
  bool history_with_release(const ReleaseRequest& req) const {
    return !lost_ && sql::records_with_release(st_, *held_, req, keep_);
  }

  // Before a release runs again (its connection was lost, or the server rolled it back as a
  // conflict): whether a first try committed before its reply was lost (a read timeout on a
  // loaded server). The row still ours, released, is that try's doing (its history row with
  // it when they share a transaction), and no loss; running it again would find it released and
  // say lost.
  // Only a `release --force` in the same moment would look alike.
  Result<bool> released_by_us() {
    LockRequest row = held_->request;
    row.key = held_->key;
    row.min_interval = Millis(0);
    auto seen = refused(*session_, st_, row);
    if (!seen) return std::unexpected(seen.error());
    const auto& h = seen->holder;
    return h && h->owner == held_->owner && h->token == held_->token && h->released_at_ms.has_value();
  }

  std::unexpected<Error> lost(const std::string& what) const {
    return fail(ErrorKind::lost, "the lease on '" + held_->key + "' (token " + std::to_string(held_->token) + ") " + what);
  }

  std::shared_ptr<Session> session_;
  LeaseStatements st_;
  std::string prefix_;
  int keep_;
  // The take reads the failover gate itself (take_reads_gate): admitted only when it refused.
  bool take_reads_gate_;
  // The release tells the waiters and commits alone, unsynced (release_tells): the history row
  // comes after it unless the release writes it too.
  bool release_tells_;
  std::optional<HeldRun> held_;
  bool lost_ = false;  // renew() found the lease taken or released; held_ stays for the history row
  // The failover gate found open on this connection (admit_once); renew and release may
  // reconnect, so they forget it.
  std::optional<failover::Admitted> admitted_;
  // The renewal's connection was lost: the one made again may reach a new primary.
  bool reconnected_ = false;
};

}  // namespace

std::unique_ptr<Locker> make_lease_locker(std::shared_ptr<Session> session, const LeaseStatements& statements,
                                          std::string prefix, int keep) {
  return std::make_unique<LeaseLocker>(std::move(session), statements, std::move(prefix), keep);
}

}  // namespace dblock::sql

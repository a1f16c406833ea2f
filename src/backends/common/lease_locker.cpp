#include "backends/common/lease_locker.hpp"

#include <chrono>
#include <utility>

#include "backends/common/identifiers.hpp"
#include "core/semaphore.hpp"

namespace dblock::sql {
namespace {

// Columns of `refusal` and `header_refusal` after the status columns.
constexpr int live_column = rows::status_column_count;
constexpr int extra_column = rows::status_column_count + 1;

LockStatus refusing_row(const Rows::Row& row) {
  return rows::read_status(row, {.lease_live = row.opt_int64(live_column).value_or(0) != 0});
}

class LeaseLocker final : public Locker {
 public:
  LeaseLocker(std::shared_ptr<Session> session, const LeaseStatements& statements, std::string prefix, int keep)
      : session_(std::move(session)), st_(statements), prefix_(std::move(prefix)), keep_(keep) {}

  // One attempt, and more while the dialect hears of a release within `wait` (or at once).
  Result<AcquireOutcome> try_acquire(const LockRequest& req, Millis wait) override {
    if (held_) return fail(ErrorKind::internal, "this locker already holds " + held_->key);
    ReleaseSignal& signal = session_->release_signal();
    const auto until = std::chrono::steady_clock::now() + wait;
    bool waited = false;
    Result<AcquireOutcome> out;
    // A dialect that does not block (it only says a release may have happened) gets a few
    // quick retries; one that blocks is bounded by `wait`.
    for (int round = 0;; ++round) {
      out = with_schema(*session_, [&] { return attempt(req); });
      if (!out) {
        // No retry here: had the lost reply carried our takeover, a retry would see our own
        // row busy. Reconnect for the next attempt, which core schedules.
        if (out.error().kind == ErrorKind::connection) {
          admitted_.reset();
          (void)session_->reconnect(out.error());
        }
        break;
      }
      if (out->state != AcquireOutcome::State::busy) break;
      const auto left = std::max(Millis(0), std::chrono::duration_cast<Millis>(until - std::chrono::steady_clock::now()));
      if (round >= 3 && left == Millis(0)) break;
      auto again = signal.busy(signal_key(req), left);
      if (!again) {
        out = std::unexpected(again.error());
        break;
      }
      if (!*again) break;
      waited = true;
    }
    if (waited && (!out || out->state != AcquireOutcome::State::acquired)) signal.stop_waiting(signal_key(req));
    if (out && out->state == AcquireOutcome::State::acquired) signal.holding(signal_key(req));
    return out;
  }

  Result<void> renew(Millis ttl) override {
    if (!held_ || lost_) return fail(ErrorKind::lost, "no lease is held, so there is nothing to renew");
    admitted_.reset();
    const Params p{{"key", held_->key}, {"owner", held_->owner}, {"token", held_->token}, {"ttl_ms", ms_value(ttl)}};
    auto r = with_reconnect(*session_, [&] { return session_->run(st_.renew, p); });
    if (!r) return std::unexpected(r.error());
    if (r->affected == 0) {
      // Kept (not reset): release() still writes this run's history row.
      lost_ = true;
      return lost("is no longer held by " + held_->owner + ": it expired and was taken, or was released");
    }
    return {};
  }

  Result<void> release(const ReleaseRequest& req) override {
    if (!held_) return fail(ErrorKind::lost, "no lease is held, so there is nothing to release");
    admitted_.reset();
    // Until the release has committed the lease is still ours: a release that failed leaves
    // it held, to be retried or left to expire.
    auto released = with_reconnect(*session_, [&] { return with_schema(*session_, [&] { return release_once(req); }); });
    if (!released) return std::unexpected(released.error());
    session_->release_signal().released(signal_key(held_->request));
    const bool was_lost = lost_;
    auto message = lost(was_lost ? "was lost before it was released"
                                 : "was no longer held by " + held_->owner + " when it was released");
    held_.reset();
    lost_ = false;
    if (!*released) return message;
    return {};
  }

  int wakeup_fd() const override { return session_->release_signal().fd(); }
  void consume_wakeup() override { session_->release_signal().consume(); }

 private:
  struct Held : HeldLock {
    LockRequest request;
    std::int64_t acquired_ms = 0;
  };

  // A semaphore's slots are waited for as one: any slot's release wakes its waiters.
  static const std::string& signal_key(const LockRequest& req) { return req.semaphore.empty() ? req.key : req.semaphore; }

  Params take_params(const LockRequest& req, const Value& token, std::int64_t fence) const {
    return {{"key", req.key},           {"owner", req.owner},     {"host", req.host},
            {"pid", req.pid},           {"ttl_ms", ms_value(req.ttl)}, {"min_interval_ms", ms_value(req.min_interval)},
            {"token", token},           {"record", std::string(failover::record_name)}, {"fence", fence}};
  }

  // Busy for everyone: the database failed over and its lock-delay is in force.
  static AcquireOutcome delayed(const failover::Gate& gate) {
    AcquireOutcome out;
    out.state = AcquireOutcome::State::busy;
    out.lock_delay = gate.delay;
    return out;
  }

  Result<AcquireOutcome> attempt(const LockRequest& req) {
    if (!req.semaphore.empty()) return attempt_slot(req);
    const FailoverStatements& fo = st_.failover;
    std::int64_t fence = 0;
    if (!fo.folded) {
      auto gate = admit_once(req);
      if (!gate) return std::unexpected(gate.error());
      if (!gate->open) return delayed(*gate);
      fence = gate->fence;
    }
    const Params p = take_params(req, Value(), fence);
    auto took = session_->run(st_.take, p);
    if (!took) return std::unexpected(took.error());
    if (took->affected == 0 && fo.folded) {
      // The take's own gate may have refused rather than a holder: no record yet, a record of
      // another primary (a failover), or a TTL longer than any recorded.
      auto gate = failover::admit(*session_, fo, req.ttl);
      if (!gate) return std::unexpected(gate.error());
      if (!gate->open) return delayed(*gate);
      if (gate->changed) took = session_->run(st_.take, p);
      if (!took) return std::unexpected(took.error());
    }
    if (took->affected == 0) return refused(req);
    return taken(req, *took);
  }

  // The gate before a take, asked once per connection while it stays open: the server a
  // connection reaches cannot become another incarnation, and once this server's incarnation is
  // recorded with a TTL as long as this one, only a write from another server (a split brain)
  // could close it again. A reconnect asks again.
  Result<failover::Gate> admit_once(const LockRequest& req) {
    if (admitted_ && admitted_->ttl >= req.ttl) return admitted_->gate;
    auto gate = failover::admit(*session_, st_.failover, req.ttl);
    if (gate && gate->open) admitted_ = Admitted{*gate, req.ttl};
    return gate;
  }

  // A semaphore's slot: its header, then the slot row with the header's token, in one
  // transaction (src/backends/README.md "Semaphores"); a slot not taken rolls the header back.
  // The failover gate goes first, outside the transaction: what it records must stay.
  Result<AcquireOutcome> attempt_slot(const LockRequest& req) {
    auto gate = admit_once(req);
    if (!gate) return std::unexpected(gate.error());
    if (!gate->open) return delayed(*gate);
    auto tx = Transaction::begin(*session_, st_.begin);
    if (!tx) return std::unexpected(tx.error());
    const Params hp{{"key", req.semaphore}, {"owner", req.owner}, {"host", req.host}, {"pid", req.pid},
                    {"slots", std::int64_t{req.slots}},
                    {"first", req.semaphore + slot_separator},
                    {"past", req.semaphore + char(slot_separator + 1)},
                    {"fence", gate->fence}};
    auto header = session_->run(st_.header_take, hp);
    if (!header) return std::unexpected(header.error());
    if (header->affected == 0) return header_refused(req);
    auto header_row = row_of(*header, req.semaphore, req.owner);
    if (!header_row) return std::unexpected(header_row.error());
    auto took = session_->run(st_.take, take_params(req, header_row->token, gate->fence));
    if (!took) return std::unexpected(took.error());
    if (took->affected == 0) return refused(req);
    auto out = taken(req, *took);
    if (!out) return out;
    if (auto ok = tx->commit(); !ok) {
      held_.reset();
      return std::unexpected(ok.error());
    }
    return out;
  }

  struct TakenRow {
    std::int64_t token = 0;
    std::optional<std::int64_t> acquired_ms, expires_ms;
  };

  // The taken row: from the statement's own rows, or read back.
  Result<TakenRow> row_of(const Rows& took, const std::string& key, const std::string& owner) {
    Rows read;
    const Rows* rows = &took;
    if (took.empty()) {
      auto r = session_->run(st_.taken, {{"key", key}, {"owner", owner}});
      if (!r) return std::unexpected(r.error());
      if (r->empty()) return fail(ErrorKind::lost, "the lock " + key + " was taken over right after it was acquired");
      read = std::move(*r);
      rows = &read;
    }
    const auto row = (*rows)[0];
    return TakenRow{row.int64(0), row.opt_int64(1), row.opt_int64(2)};
  }

  Result<AcquireOutcome> taken(const LockRequest& req, const Rows& took) {
    auto row = row_of(took, req.key, req.owner);
    if (!row) return std::unexpected(row.error());
    AcquireOutcome out;
    out.state = AcquireOutcome::State::acquired;
    out.token = row->token;
    out.acquired_at_ms = row->acquired_ms;
    out.expires_at_ms = row->expires_ms;
    held_ = Held{{req.key, req.owner, req.host, req.pid, out.token}, req, row->acquired_ms.value_or(0)};
    return out;
  }

  // Cold path: who holds it, or when --min-interval will have elapsed.
  Result<AcquireOutcome> refused(const LockRequest& req) {
    auto r = session_->run(st_.refusal, {{"key", req.key}, {"min_interval_ms", ms_value(req.min_interval)}});
    if (!r) return std::unexpected(r.error());
    AcquireOutcome out;
    out.state = AcquireOutcome::State::busy;
    if (r->empty()) return out;  // gone in between: core simply retries
    const auto row = (*r)[0];
    LockStatus holder = refusing_row(row);
    const auto due_in = row.opt_int64(extra_column);
    if (holder.state != LockStatus::State::held && req.min_interval.count() > 0 && due_in && *due_in > 0) {
      out.state = AcquireOutcome::State::not_due;
      out.due_in = Millis(*due_in);
    }
    out.holder = std::move(holder);  // not due: its last start and host
    return out;
  }

  // The header refused: another slot count recorded, or a plain holder of the key.
  Result<AcquireOutcome> header_refused(const LockRequest& req) {
    auto r = session_->run(st_.header_refusal, {{"key", req.semaphore}});
    if (!r) return std::unexpected(r.error());
    AcquireOutcome out;
    out.state = AcquireOutcome::State::busy;
    if (r->empty()) return out;
    const auto row = (*r)[0];
    const auto recorded = row.opt_int64(extra_column);
    if (recorded && *recorded != req.slots) out.recorded_slots = static_cast<int>(*recorded);
    else out.holder = refusing_row(row);
    return out;
  }

  // The release and the run's history row, one transaction. true: the lease was still ours.
  Result<bool> release_once(const ReleaseRequest& req) {
    auto tx = Transaction::begin(*session_, st_.begin_release);
    if (!tx) return std::unexpected(tx.error());
    const Held& h = *held_;
    if (!h.request.semaphore.empty())
      if (auto r = session_->run(st_.lock_row, {{"key", h.request.semaphore}}); !r) return std::unexpected(r.error());
    bool still_held = false;
    if (!lost_) {
      auto r = session_->run(st_.release, {{"key", h.key},
                                            {"owner", h.owner},
                                            {"token", h.token},
                                            {"min_hold_ms", ms_value(req.min_hold)},
                                            {"finished", std::int64_t{req.finished_run ? 1 : 0}},
                                            {"exit_code", value_of(req.exit_code)},
                                            {"channel", release_channel(prefix_, signal_key(h.request))}});
      if (!r) return std::unexpected(r.error());
      still_held = r->affected > 0;
    }
    // The run happened even when the lease was lost meanwhile: its history row is still written.
    if (req.history)
      if (auto ok = record_run(*session_, st_, complete_run_record(*req.history, h, "lease", still_held),
                               h.acquired_ms, keep_);
          !ok)
        return std::unexpected(ok.error());
    if (auto ok = tx->commit(); !ok) return std::unexpected(ok.error());
    return still_held;
  }

  std::unexpected<Error> lost(const std::string& what) const {
    return fail(ErrorKind::lost, "the lease on '" + held_->key + "' (token " + std::to_string(held_->token) + ") " + what);
  }

  std::shared_ptr<Session> session_;
  LeaseStatements st_;
  std::string prefix_;
  int keep_;
  std::optional<Held> held_;
  // The failover gate found open on this connection (admit_once); renew and release may
  // reconnect, so they forget it.
  struct Admitted {
    failover::Gate gate;
    Millis ttl;
  };
  std::optional<Admitted> admitted_;
  bool lost_ = false;  // renew() found the lease taken or released; held_ stays for the history row
};

}  // namespace

Result<void> record_run(Session& session, const LeaseStatements& st, const RunRecord& run, std::int64_t started_ms,
                        int keep) {
  auto added = session.run(st.history_add, {{"name", run.key},
                                            {"token", run.token},
                                            {"owner", run.owner},
                                            {"host", run.host},
                                            {"pid", run.pid},
                                            {"strategy", run.strategy},
                                            {"started_ms", started_ms},
                                            {"outcome", std::string(to_string(run.outcome))},
                                            {"exit_code", value_of(run.exit_code)}});
  if (!added) return std::unexpected(added.error());
  auto trimmed = session.run(st.history_trim, {{"name", run.key}, {"keep", std::int64_t{keep < 0 ? 0 : keep}}});
  if (!trimmed) return std::unexpected(trimmed.error());
  return {};
}

std::unique_ptr<Locker> make_lease_locker(std::shared_ptr<Session> session, const LeaseStatements& statements,
                                          std::string prefix, int keep) {
  return std::make_unique<LeaseLocker>(std::move(session), statements, std::move(prefix), keep);
}

}  // namespace dblock::sql

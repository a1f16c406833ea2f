#include "core/sql/lock_rows.hpp"
#include "core/sql/shedlock_locker.hpp"

#include <utility>

#include "core/sql/lease_locker.hpp"
#include "core/sql/lock_steps.hpp"
#include "core/sql/shedlock.hpp"

namespace dblock::sql {

LockStatus shedlock_holder(const rows::ColumnReader& row) {
  LockStatus s;
  s.key = row.text(0);
  s.owner = row.text(1);
  s.strategy = "shedlock";
  s.acquired_at_ms = row.opt_int64(2);
  s.expires_at_ms = row.opt_int64(3);
  s.db_now_ms = row.opt_int64(4).value_or(0);
  s.token = row.opt_int64(5).value_or(0);
  s.host = row.text(6);
  s.pid = row.opt_int64(7).value_or(0);
  s.state = s.expires_at_ms && *s.expires_at_ms > s.db_now_ms ? LockStatus::State::held : LockStatus::State::free;
  return s;
}

namespace {

class ShedlockLocker final : public Locker {
 public:
  ShedlockLocker(std::shared_ptr<Session> session, ShedlockStatements statements, LeaseStatements history, int keep,
                 std::string table)
      : session_(std::move(session)), st_(std::move(statements)), history_(std::move(history)), keep_(keep),
        table_(std::move(table)) {}

  Result<AcquireOutcome> try_acquire(const LockRequest& req, Millis) override {
    if (held_) return fail(ErrorKind::internal, "this locker already holds " + held_->key);
    if (auto ok = shedlock::check_name(req.key); !ok) return std::unexpected(ok.error());
    if (req.min_interval.count() > 0)
      return fail(ErrorKind::usage, "--min-interval needs dblock's own table: ShedLock's table keeps no last start");
    auto out = with_schema(*session_, [&] { return attempt(req); });
    if (!out && out.error().kind == ErrorKind::connection) (void)session_->reconnect(out.error());
    return out;
  }

  Result<void> renew(Millis ttl) override {
    if (!held_ || lost_) return fail(ErrorKind::lost, "no lock is held, so there is nothing to renew");
    const Params p{{"key", held_->key}, {"owner", held_->owner}, {"token", held_->token}, {"ttl_ms", ms_value(ttl)}};
    auto r = with_retry(*session_, [&]() -> Result<Rows> {
      if (st_.extend_own.text.empty()) return session_->run(st_.extend, p);
      auto tx = Transaction::begin(*session_, st_.begin);
      if (!tx) return std::unexpected(tx.error());
      auto extended = session_->run(st_.extend, p);
      if (!extended) return extended;
      if (extended->affected > 0)
        if (auto own = session_->run(st_.extend_own, p); !own) return std::unexpected(own.error());
      if (auto ok = tx->commit(); !ok) return std::unexpected(ok.error());
      return extended;
    });
    if (!r) return std::unexpected(r.error());
    if (r->affected == 0) {
      lost_ = true;  // held_ stays: release() still writes the history row
      return fail(ErrorKind::lost, "the ShedLock lock " + held_->key + " is no longer held by " + held_->owner +
                                       ": its lock_until passed or another holder took it");
    }
    return {};
  }

  Result<void> release(const ReleaseRequest& req) override {
    if (!held_) return fail(ErrorKind::lost, "no lock is held, so there is nothing to release");
    auto released = with_retry(*session_, [&] { return release_once(req); });
    if (!released) return std::unexpected(released.error());
    const Held held = std::move(*held_);
    held_.reset();
    lost_ = false;
    if (!*released)
      return fail(ErrorKind::lost, "the ShedLock lock " + held.key + " was no longer held by " + held.owner +
                                       " when it was released");
    return {};
  }

 private:
  struct Held : HeldLock {
    std::int64_t acquired_ms = 0;
  };

  Result<AcquireOutcome> attempt(const LockRequest& req) {
    auto tx = Transaction::begin(*session_, st_.begin);
    if (!tx) return std::unexpected(tx.error());
    auto took = session_->run(st_.take, {{"key", req.key}, {"owner", req.owner}, {"ttl_ms", ms_value(req.ttl)}});
    if (!took) return std::unexpected(took.error());
    AcquireOutcome out;
    if (took->affected == 0) {
      auto holder = session_->run(st_.holder, {{"key", req.key}});
      if (!holder) return std::unexpected(holder.error());
      if (!holder->empty()) out.holder = shedlock_holder((*holder)[0]);
      // The table's collation made another spelling this name (MySQL's, as Java ShedLock has
      // it): one ShedLock lock, but dblock's tokens count each spelling apart.
      if (out.holder && out.holder->key != req.key)
        return fail(ErrorKind::config, "ShedLock's table has this name as '" + out.holder->key +
                                           "', which its collation takes for '" + req.key +
                                           "', while dblock's tokens tell the two apart; use '" + out.holder->key +
                                           "' on every host");
      return out;  // busy; the transaction changed nothing
    }
    if (!took->empty()) out.expires_at_ms = (*took)[0].opt_int64(0);
    // The fencing token ShedLock lacks: dblock's row of the name, bumped in the same transaction.
    Params who{{"key", req.key}, {"table", table_}, {"ttl_ms", ms_value(req.ttl)}};
    rows::bind_holder(who, req);
    auto numbered = session_->run(st_.number, who);
    if (!numbered) return std::unexpected(numbered.error());
    if (numbered->affected == 0) {
      // dblock's row records another strategy's holder: refused (one key, one way of locking
      // it), or busy if the row changed in between. The ShedLock take rolls back with the
      // transaction.
      LockRequest row = req;
      row.min_interval = Millis(0);
      auto why = refused(*session_, history_, row, nullptr, "shedlock");
      // A 'shedlock' row refuses only a take on another ShedLock table (number's contract).
      if (why && why->holder && why->holder->strategy == "shedlock" && !why->holder->released_at_ms)
        return std::unexpected(other_table(req.key, *why->holder));
      return why;
    }
    if (numbered->empty()) numbered = session_->run(st_.numbered, who);
    if (!numbered) return std::unexpected(numbered.error());
    if (numbered->empty()) return fail(ErrorKind::internal, "no token row for " + req.key);
    out.state = AcquireOutcome::State::acquired;
    out.token = (*numbered)[0].int64(0);
    out.acquired_at_ms = (*numbered)[0].opt_int64(1);
    if (auto ok = tx->commit(); !ok) return std::unexpected(ok.error());
    held_ = Held{{req.key, req.owner, req.host, req.pid, out.token}, out.acquired_at_ms.value_or(0)};
    return out;
  }

  Result<bool> release_once(const ReleaseRequest& req) {
    auto tx = Transaction::begin(*session_, st_.begin);
    if (!tx) return std::unexpected(tx.error());
    const Held& h = *held_;
    bool released = false;
    if (!lost_) {
      auto r = session_->run(st_.unlock,
                             {{"key", h.key}, {"owner", h.owner}, {"token", h.token}, {"min_hold_ms", ms_value(req.min_hold)}});
      if (!r) return std::unexpected(r.error());
      released = r->affected > 0;
    }
    auto marked = session_->run(st_.finish, {{"key", h.key},
                                              {"token", h.token},
                                              {"finished", std::int64_t{req.finished_run ? 1 : 0}},
                                              {"exit_code", value_of(req.exit_code)},
                                              {"min_hold_ms", ms_value(req.min_hold)}});
    if (!marked) return std::unexpected(marked.error());
    if (req.history)
      if (auto ok = record_run(*session_, history_, complete_run_record(*req.history, h, "lease", released),
                               h.acquired_ms, keep_);
          !ok)
        return std::unexpected(ok.error());
    if (auto ok = tx->commit(); !ok) return std::unexpected(ok.error());
    return released;
  }

  // ErrorKind::config: `key` is held through another ShedLock table than this run's.
  Error other_table(const std::string& key, const LockStatus& holder) const {
    return Error{ErrorKind::config,
                 "'" + key + "' is taken with --table-format shedlock on another ShedLock table than " + table_ +
                     " and not released (owner " + holder.owner + ", token " + std::to_string(holder.token) +
                     "): a name is one lock only in one table, so every host must give the same --table. `dblock "
                     "--table-format dblock status " + key + "` shows the holder; if it is gone, `dblock release "
                     "--force " + key + "` frees the key"};
  }

  std::shared_ptr<Session> session_;
  ShedlockStatements st_;
  LeaseStatements history_;
  int keep_;
  std::string table_;
  std::optional<Held> held_;
  bool lost_ = false;  // renew() found the lock gone; held_ stays for the history row
};

}  // namespace

std::unique_ptr<Locker> make_shedlock_locker(std::shared_ptr<Session> session, const ShedlockStatements& statements,
                                             const LeaseStatements& history, int keep, std::string table) {
  return std::make_unique<ShedlockLocker>(std::move(session), statements, history, keep, std::move(table));
}

Result<void> release_shedlock(Session& session, const ShedlockStatements& st, const std::string& key,
                              const HolderSelector& who) {
  auto tx = Transaction::begin(session, st.begin);
  if (!tx) return std::unexpected(tx.error());
  auto found = session.run(st.named_holder, {{"key", key},
                                             {"owner", who.owner ? Value(*who.owner) : Value()},
                                             {"token", value_of(who.token)},
                                             {"force", std::int64_t{who.force ? 1 : 0}}});
  if (!found) return std::unexpected(found.error());
  if (found->empty()) {
    if (who.force) return {};
    return fail(ErrorKind::lost, "the lock " + key + " is not held by " + rows::describe(who));
  }
  // ShedLock's unlock with lockAtLeastFor 0 (--force also cuts a lockAtLeastFor short), then
  // dblock's row of that holder is marked released.
  const std::string holder = (*found)[0].text(0);
  if (auto r = session.run(st.unlock, {{"key", key}, {"owner", holder}, {"token", Value()}, {"min_hold_ms", std::int64_t{0}}});
      !r)
    return std::unexpected(r.error());
  if (auto r = session.run(st.released, {{"key", key}, {"owner", holder}}); !r) return std::unexpected(r.error());
  return tx->commit();
}

}  // namespace dblock::sql

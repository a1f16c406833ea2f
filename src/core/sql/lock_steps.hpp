#pragma once
// The steps the lockers of this folder share (lease_locker.cpp, session_locker.cpp): reading a
// taken row back, why a row refused, a semaphore's header, and the release with its history
// row. Each is one statement's or one transaction's worth of work on a Session, decided here
// once for every dialect.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "core/lock_types.hpp"
#include "core/sql/statements.hpp"

namespace dblock::sql {

/// A lock this process holds, with what it asked for (its semaphore, for the release) and when
/// it was acquired (its history row's start).
struct HeldRun : HeldLock {
  LockRequest request;
  std::int64_t acquired_ms = 0;
};

/// The key a waiter hears releases of: a semaphore's slots are waited for as one, so any
/// slot's release wakes its waiters.
inline const std::string& signal_key(const LockRequest& req) {
  return req.semaphore.empty() ? req.key : req.semaphore;
}

/// `attempt(left)` (left: what remains of `wait`), made again while it answers busy and
/// `signal` hears that a release may have happened within `wait`; a signal that does not block
/// (it only says a release may have happened) gets a few quick retries. A connection error ends
/// it: the caller reconnects for the next attempt, which core schedules (had the lost reply
/// carried our takeover, a retry would see our own row busy). Tells the signal when the key was
/// taken, or when a waiter stops waiting without it.
template <class Attempt>
Result<AcquireOutcome> until_not_busy(Waiters& signal, const LockRequest& req, Millis wait, Attempt&& attempt) {
  const auto until = std::chrono::steady_clock::now() + wait;
  auto left = [&] {
    return std::max(Millis(0), std::chrono::duration_cast<Millis>(until - std::chrono::steady_clock::now()));
  };
  bool waited = false;
  Result<AcquireOutcome> out;
  for (int round = 0;; ++round) {
    out = attempt(left());
    if (!out || out->state != AcquireOutcome::State::busy) break;
    if (round >= 3 && left() == Millis(0)) break;
    auto again = signal.busy(signal_key(req), left());
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

/// What a take answered about the row it took.
struct TakenRow {
  std::int64_t token = 0;
  std::optional<std::int64_t> acquired_ms, expires_ms;
};

/// The row `take` (or `session_take`, `header_take`) took: from its own rows, or read back
/// with `taken` for a dialect whose statement returns none (by `holding`'s wake primitive where it
/// answers, Waiters::reading_taken). ErrorKind::lost when the row is no longer `owner`'s.
Result<TakenRow> taken_row(Session& session, const LeaseStatements& st, const Rows& took, const std::string& key,
                           const std::string& owner, Waiters* holding = nullptr);

/// A take that took the row (`took`, affected > 0): the outcome, acquired, from taken_row.
Result<AcquireOutcome> acquired(Session& session, const LeaseStatements& st, const Rows& took, const LockRequest& req,
                                Waiters* holding = nullptr);

/// Whether `take` took the row, by its answer `took`: its row's token, or, where it returns
/// no rows, the rows it changed (LeaseStatements::take).
bool took_row(const Rows& took);

/// Whether a take's answer `took` says why it took nothing: the refusal's columns after the
/// taken row's (LeaseStatements::take).
bool take_explained(const Rows& took);

/// Whether `take` reads the failover gate itself (it binds :record; LeaseStatements::take):
/// the gate is then admitted only when a take refused, else before each take, whose :fence it
/// gives.
bool take_reads_gate(const LeaseStatements& st);
/// Whether `session_take` reads the failover gate itself, as `take` may: it then answers no row
/// when the gate (or whether a session lock could hold there) refused, not the key's row.
bool session_take_reads_gate(const LeaseStatements& st);
/// Whether the numbered advisory take that does not wait (LockStatements::advisory_numbered_try,
/// else _wait) reads the failover gate itself when it is given no :fence: it then answers
/// (NULL, NULL, NULL, 2) and takes nothing when the gate did not open.
bool numbered_take_reads_gate(const LockStatements& st);
/// Whether a row lock's numbering that proves its grant (LockStatements::row_numbered) reads the
/// failover gate itself, as session_take does where it reads it: no row when it did not open.
bool numbering_reads_gate(const LockStatements& st);

/// Whether the lease's `release` tells the key's waiters itself (it binds :channel;
/// Dialect::release_returns), and so commits alone without waiting for the disk: it then runs
/// alone, and wakes the waiters, ahead of the run's history row, which otherwise shares its
/// transaction (LeaseStatements::release).
bool release_tells(const LeaseStatements& st);

/// Whether `take`'s answer `took` says the failover record names another incarnation than the
/// server's (LeaseStatements::take, its column after the refusal's); false when it cannot say.
bool took_on_new_incarnation(const Rows& took);

/// Whether `renew`'s answer says anything of the failover record (LeaseStatements::renew), and
/// whether it says the record names another incarnation.
bool renewal_tells(const Rows& renewed);
bool renewed_on_new_incarnation(const Rows& renewed);

/// The row of `req.key` that refused a take, from the take's answer `took` when it explains
/// itself (take_explained; the refusal's columns from `first`, after the taken row's, or after
/// a session strategy's numbered take's four: LockStatements::advisory_numbered_wait), else
/// read with `refusal`: busy with
/// its holder, or not_due while --min-interval has not passed and nobody holds it. With the
/// strategy the take `asked` for ("shedlock": --table-format shedlock), a row of another
/// strategy whose holder may still hold the key (rows::other_strategy_holds) is ErrorKind::config
/// (strategy_mismatch), as a different --slots count is.
Result<AcquireOutcome> refused(Session& session, const LeaseStatements& st, const LockRequest& req,
                               const Rows* took = nullptr, std::string_view asked = {}, int first = 3);

/// ErrorKind::config: `req`'s key is recorded as taken by `holder` with another strategy (or
/// table format) than `asked`, and not released. Names both, the holder and the way out.
Error strategy_mismatch(const LockRequest& req, const LockStatus& holder, std::string_view asked);

/// A semaphore's header row for `req` (a slot), inside the caller's transaction, its token
/// above the failover `fence` (failover.hpp): taken (its token, which the slot row gets), or
/// the outcome that says why not (another slot count recorded while a slot is held, or a plain
/// holder of the key). One statement when the header records req.slots; a count change reads
/// the slot rows in a statement of its own, once the first has locked the header.
struct HeaderTake {
  std::optional<std::int64_t> token;
  AcquireOutcome refusal;
};
Result<HeaderTake> take_header(Session& session, const LeaseStatements& st, const LockRequest& req,
                               std::int64_t fence);

/// What a release writes: the holder's row and, when asked, its run's history row.
struct ReleaseRow {
  const HeldRun& held;
  std::string_view strategy;
  bool write_row = true;         // false: the lock is known lost, only the history row is written
  bool write_history = true;     // false: the caller writes it later (record_held_run)
};

/// Whether release_row, asked to write the holder's row and its history row, writes both in
/// one statement (LeaseStatements::release_recorded): the dialect has it, the run has a history
/// row that a history of none would not trim at once, and it is not a slot's (its header goes
/// first).
bool records_with_release(const LeaseStatements& st, const HeldRun& held, const ReleaseRequest& req, int keep);

/// LeaseStatements::release_recorded's parameters for the holder `h` of `strategy` (req.history
/// set; `prefix` the table prefix, `keep` the history rows kept per key).
Params release_recorded_params(const HeldRun& h, std::string_view strategy, const ReleaseRequest& req,
                               const std::string& prefix, int keep);

/// The release and the run's history row, in one statement (records_with_release) or in one
/// `begin_release` transaction (the dialect may
/// let it commit without waiting for the disk). true: the row was still the holder's.
Result<bool> release_row(Session& session, const LeaseStatements& st, const ReleaseRow& what,
                         const ReleaseRequest& req, const std::string& prefix, int keep);

/// The run's history row alone, after its release: HistoryStatements::record where the dialect
/// has it (not for a slot), else in a `begin_release` transaction of its own that first locks a
/// slot's header (lock_row, as release_row does); run again as with_retry and
/// with_schema do (sql_session.hpp); `still_held`: what the release found. Its error says that
/// the release itself went through.
Result<void> record_held_run(Session& session, const LeaseStatements& st, const HeldRun& held, std::string_view strategy,
                             bool still_held, const ReleaseRequest& req, int keep);

/// How many rows beyond the newest `keep` a key's history may hold before a run trims it
/// (dblock(1), --history-keep): a trim walks `keep` index entries, so trimming once in
/// keep/10 + 1 runs keeps a run's share of that walk near ten entries whatever `keep` is.
constexpr int history_slack(int keep) { return keep < 0 ? 0 : keep / 10; }

/// HistoryStatements::add's parameters for `run`, acquired at `started_ms`.
Params history_params(const RunRecord& run, std::int64_t started_ms);

/// The run's history row (`started_ms`: when its lock was acquired) and, once the key may hold
/// more than keep + history_slack(keep) rows, the trim of its rows beyond the newest `keep`,
/// inside the caller's transaction.
Result<void> record_run(Session& session, const LeaseStatements& st, const RunRecord& run, std::int64_t started_ms,
                        int keep);

}  // namespace dblock::sql

#include "core/sql/lock_rows.hpp"
#include "core/sql/lock_steps.hpp"

#include <algorithm>
#include <optional>

#include "core/semaphore.hpp"
#include "core/sql/identifiers.hpp"

namespace dblock::sql {
namespace {

// Columns of `refusal` and `header_refusal` after the status columns.
constexpr int live_column = rows::status_column_count;
constexpr int extra_column = rows::status_column_count + 1;
// The taken row's columns, which come first in a take's answer.
constexpr int taken_columns = 3;

bool lease_live(const Rows::Row& row) { return row.opt_int64(live_column).value_or(0) != 0; }

LockStatus refusing_row(const Rows::Row& row) { return rows::read_status(row, {.lease_live = lease_live(row)}); }

// How a user asks for a strategy: "--strategy advisory", "--table-format shedlock".
std::string way_of(std::string_view strategy) {
  if (strategy == "shedlock") return "--table-format shedlock";
  return "--strategy " + std::string(strategy);
}

}  // namespace

Params history_params(const RunRecord& run, std::int64_t started_ms) {
  return {{"name", run.key},
          {"token", run.token},
          {"owner", run.owner},
          {"host", run.host},
          {"pid", run.pid},
          {"strategy", run.strategy},
          {"started_ms", started_ms},
          {"outcome", std::string(to_string(run.outcome))},
          {"exit_code", value_of(run.exit_code)}};
}

Result<TakenRow> taken_row(Session& session, const LeaseStatements& st, const Rows& took, const std::string& key,
                           const std::string& owner, Waiters* holding) {
  Rows read;
  const Rows* rows = &took;
  if (took.empty()) {
    const Params p{{"key", key}, {"owner", owner}};
    Result<Rows> r = Rows();
    if (!holding || !holding->reading_taken(key, p, r)) r = session.run(st.taken, p);
    if (!r) return std::unexpected(r.error());
    if (r->empty()) return fail(ErrorKind::lost, "the lock " + key + " was taken over right after it was acquired");
    read = std::move(*r);
    rows = &read;
  }
  const auto row = (*rows)[0];
  return TakenRow{row.int64(0), row.opt_int64(1), row.opt_int64(2)};
}

// Cold path: who holds it, or when --min-interval will have elapsed.

Result<AcquireOutcome> acquired(Session& session, const LeaseStatements& st, const Rows& took, const LockRequest& req,
                                Waiters* holding) {
  auto row = taken_row(session, st, took, req.key, req.owner, holding);
  if (!row) return std::unexpected(row.error());
  AcquireOutcome out;
  out.state = AcquireOutcome::State::acquired;
  out.token = row->token;
  out.acquired_at_ms = row->acquired_ms;
  out.expires_at_ms = row->expires_ms;
  return out;
}

bool took_row(const Rows& took) { return took.empty() ? took.affected > 0 : !took[0].is_null(0); }

bool take_explained(const Rows& took) { return !took.empty() && took[0].columns() > taken_columns; }

namespace {

bool binds(const Statement& statement, std::string_view name) {
  const std::vector<std::string> names = compile(statement.text, PlaceholderStyle::dollar).names;
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

bool take_reads_gate(const LeaseStatements& st) { return binds(st.take, "record"); }

bool session_take_reads_gate(const LeaseStatements& st) { return binds(st.session_take, "record"); }

bool numbered_take_reads_gate(const LockStatements& st) {
  return binds(st.advisory_numbered_try.empty() ? st.advisory_numbered_wait : st.advisory_numbered_try, "record");
}

bool numbering_reads_gate(const LockStatements& st) { return binds(st.row_numbered, "record"); }

bool release_tells(const LeaseStatements& st) { return binds(st.release, "channel"); }

bool took_on_new_incarnation(const Rows& took) {
  // After the taken row's columns and the refusal's.
  constexpr int stale_column = taken_columns + extra_column + 1;
  return !took.empty() && took[0].columns() > stale_column && took[0].opt_int64(stale_column).value_or(0) != 0;
}

bool renewal_tells(const Rows& renewed) { return !renewed.empty() && renewed[0].columns() >= 1; }

bool renewed_on_new_incarnation(const Rows& renewed) {
  return renewal_tells(renewed) && renewed[0].opt_int64(0).value_or(0) != 0;
}

Error strategy_mismatch(const LockRequest& req, const LockStatus& holder, std::string_view asked) {
  const std::string key = req.semaphore.empty() ? req.key : req.semaphore;
  std::string text = "'" + key + "' is taken with " + way_of(holder.strategy) + " and not released (owner " +
                     holder.owner;
  if (!holder.host.empty()) text += ", host " + holder.host;
  if (holder.pid != 0) text += ", pid " + std::to_string(holder.pid);
  // The holder is read, and its row cleared, in its own table format.
  const std::string dblock = asked == "shedlock" ? "dblock --table-format dblock" : "dblock";
  text += ", token " + std::to_string(holder.token) + "); this run asked for " + way_of(asked) +
          ". A key is locked one way on every host: give each the same --strategy and --table-format. `" + dblock +
          " status " + key + "` shows the holder; if it is gone, `" + dblock + " release --force " + key +
          "` frees the key";
  return Error{ErrorKind::config, std::move(text)};
}

Result<AcquireOutcome> refused(Session& session, const LeaseStatements& st, const LockRequest& req, const Rows* took,
                               std::string_view asked, int first) {
  static_assert(taken_columns == 3, "refused()'s default `first`");
  Result<Rows> r;
  if (took && !took->empty() && (*took)[0].columns() > first) {
    // The refusal's columns follow the taken row's; a name of NULL: no row.
    r.emplace();
    const auto row = (*took)[0];
    if (!row.is_null(first)) {
      std::vector<Rows::Cell> cells;
      for (int c = first; c < first + extra_column + 1; ++c)
        cells.push_back(row.is_null(c) ? Rows::Cell() : Rows::Cell(row.text(c)));
      r->add(std::move(cells));
    }
  } else {
    r = session.run(st.refusal, {{"key", req.key}, {"min_interval_ms", ms_value(req.min_interval)}});
  }
  if (!r) return std::unexpected(r.error());
  AcquireOutcome out;
  out.state = AcquireOutcome::State::busy;
  if (r->empty()) return out;  // gone in between: core simply retries
  const auto row = (*r)[0];
  LockStatus holder = refusing_row(row);
  if (!asked.empty() && rows::other_strategy_holds(holder, lease_live(row), asked))
    return std::unexpected(strategy_mismatch(req, holder, asked));
  const auto due_in = row.opt_int64(extra_column);
  if (holder.state != LockStatus::State::held && req.min_interval.count() > 0 && due_in && *due_in > 0) {
    out.state = AcquireOutcome::State::not_due;
    out.due_in = Millis(*due_in);
  }
  out.holder = std::move(holder);  // not due: its last start and host
  return out;
}

Result<HeaderTake> take_header(Session& session, const LeaseStatements& st, const LockRequest& req,
                               std::int64_t fence) {
  Params hp{{"key", req.semaphore},
            {"slots", std::int64_t{req.slots}},
            {"first", req.semaphore + slot_separator},
            {"past", req.semaphore + char(slot_separator + 1)},
            {"fence", fence},
            {"recount", std::int64_t{0}}};
  rows::bind_holder(hp, req);
  HeaderTake out;
  auto took = [&](const Rows& header) -> Result<HeaderTake> {
    auto row = taken_row(session, st, header, req.semaphore, req.owner);
    if (!row) return std::unexpected(row.error());
    out.token = row->token;
    return out;
  };
  auto header = session.run(st.header_take, hp);
  if (!header) return std::unexpected(header.error());
  if (header->affected > 0) return took(*header);
  // Refused, and the header row is now locked by this transaction: a plain holder of the key,
  // or another slot count recorded.
  auto r = session.run(st.header_refusal, {{"key", req.semaphore}});
  if (!r) return std::unexpected(r.error());
  out.refusal.state = AcquireOutcome::State::busy;
  if (r->empty()) return out;
  const auto row = (*r)[0];
  const auto recorded = row.opt_int64(extra_column);
  if (!recorded || *recorded == req.slots) {
    out.refusal.holder = refusing_row(row);
    return out;
  }
  // The count may change once no slot is held. The slot rows are read by a statement that
  // starts now, with the header locked: every slot taken under the recorded count committed
  // before the lock was granted, and none can be taken until this transaction ends. (Read in
  // the first take, they would come from a PostgreSQL snapshot older than its wait for the
  // lock, which misses a slot committed meanwhile: two counts would hold at once.)
  hp.set("recount", std::int64_t{1});
  header = session.run(st.header_take, hp);
  if (!header) return std::unexpected(header.error());
  if (header->affected > 0) return took(*header);
  out.refusal.recorded_slots = static_cast<int>(*recorded);
  return out;
}

Params release_recorded_params(const HeldRun& h, std::string_view strategy, const ReleaseRequest& req,
                               const std::string& prefix, int keep) {
  const RunRecord run = complete_run_record(*req.history, h, strategy);
  return history_params(run, h.acquired_ms)
      .set("run_owner", run.owner)
      .set("run_host", run.host)
      .set("run_pid", run.pid)
      .set("run_exit_code", value_of(run.exit_code))
      .set("exit_code", value_of(req.exit_code))
      .set("key", h.key)
      .set("owner", h.owner)
      .set("min_hold_ms", ms_value(req.min_hold))
      .set("finished", std::int64_t{req.finished_run ? 1 : 0})
      .set("channel", release_channel(prefix, signal_key(h.request)))
      .set("keep", std::int64_t{keep})
      .set("slack", std::int64_t{history_slack(keep)});
}

bool records_with_release(const LeaseStatements& st, const HeldRun& held, const ReleaseRequest& req, int keep) {
  return req.history && keep > 0 && held.request.semaphore.empty() && !st.release_recorded.empty();
}

Result<bool> release_row(Session& session, const LeaseStatements& st, const ReleaseRow& what,
                         const ReleaseRequest& req, const std::string& prefix, int keep) {
  const HeldRun& h = what.held;
  const bool history = req.history && what.write_history;
  // Both in one statement where the dialect has it (not for a slot, whose header goes first).
  // What the take set up for the handoff to the next holder goes in the release's round trip
  // (Wake::releasing).
  if (what.write_row && history && records_with_release(st, h, req, keep)) {
    session.release_signal().releasing(h.key);
    auto r = session.run(st.release_recorded, release_recorded_params(h, what.strategy, req, prefix, keep));
    if (!r) return std::unexpected(r.error());
    return !r->empty() && (*r)[0].int64(0) != 0;
  }
  // A session holder's row alone (its history comes later) is one statement, so it needs no
  // transaction: two round trips fewer between its end and the waiter it lets in. The
  // dialect's `release` then does without the disk wait by itself where it can.
  std::optional<Transaction> tx;
  if (what.write_history) {
    auto begun = Transaction::begin(session, st.begin_release);
    if (!begun) return std::unexpected(begun.error());
    tx.emplace(std::move(*begun));
  }
  // A slot's release locks its header first, the order acquirers use: two releases of one
  // semaphore, each inserting and trimming the key's history rows, never deadlock.
  if (!h.request.semaphore.empty() && history)
    if (auto r = session.run(st.lock_row, {{"key", h.request.semaphore}}); !r) return std::unexpected(r.error());
  bool still_held = false;
  if (what.write_row) {
    session.release_signal().releasing(h.key);
    auto r = session.run(st.release, {{"key", h.key},
                                      {"owner", h.owner},
                                      {"token", h.token},
                                      {"min_hold_ms", ms_value(req.min_hold)},
                                      {"finished", std::int64_t{req.finished_run ? 1 : 0}},
                                      {"exit_code", value_of(req.exit_code)},
                                      {"channel", release_channel(prefix, signal_key(h.request))}});
    if (!r) return std::unexpected(r.error());
    still_held = r->affected > 0;
  }
  // The run happened even when the lock was lost meanwhile: its history row is still written.
  if (history)
    if (auto ok = record_run(session, st, complete_run_record(*req.history, h, what.strategy, still_held),
                             h.acquired_ms, keep);
        !ok)
      return std::unexpected(ok.error());
  // A finished run's release and history row are its last word: their commit need not be
  // awaited (exec_last). A session strategy's history row comes after its lock is given back,
  // on a session that status and history may read from at once: that one is awaited.
  if (tx)
    if (auto ok = tx->commit_last(req.finished_run && history); !ok) return std::unexpected(ok.error());
  return still_held;
}

Result<void> record_held_run(Session& session, const LeaseStatements& st, const HeldRun& held, std::string_view strategy,
                             bool still_held, const ReleaseRequest& req, int keep) {
  if (!req.history) return {};
  const RunRecord run = complete_run_record(*req.history, held, strategy, still_held);
  // One statement where the dialect has it; a slot's row needs its header locked first, and a
  // history of none trims the row just added.
  const bool alone = !st.history.record.empty() && held.request.semaphore.empty() && keep > 0;
  auto once = [&]() -> Result<void> {
    if (alone) {
      auto r = session.run(st.history.record, history_params(run, held.acquired_ms)
                                                  .set("keep", std::int64_t{keep})
                                                  .set("slack", std::int64_t{history_slack(keep)}));
      if (!r) return std::unexpected(r.error());
      return {};
    }
    auto tx = Transaction::begin(session, st.begin_release);
    if (!tx) return std::unexpected(tx.error());
    if (!held.request.semaphore.empty())
      if (auto r = session.run(st.lock_row, {{"key", held.request.semaphore}}); !r) return std::unexpected(r.error());
    if (auto ok = record_run(session, st, run, held.acquired_ms, keep); !ok) return ok;
    return tx->commit();
  };
  auto done = with_retry(session, [&] { return with_schema(session, once); });
  if (!done)
    return fail(done.error().kind,
                "released '" + held.key + "', but its run's history row was not written: " + done.error().message);
  return {};
}

Result<void> record_run(Session& session, const LeaseStatements& st, const RunRecord& run, std::int64_t started_ms,
                        int keep) {
  auto added = session.run(st.history.add, history_params(run, started_ms));
  if (!added) return std::unexpected(added.error());
  const std::int64_t kept = keep < 0 ? 0 : keep;
  const std::int64_t slack = history_slack(keep);
  if (slack > 0) {
    auto oldest = session.run(st.history.oldest, {{"name", run.key}});
    if (!oldest) return std::unexpected(oldest.error());
    // Each of the key's rows has a token of its own, from the oldest row's to this run's: when
    // that span fits, so do the rows. A span that does not count them (tokens that went back)
    // trims.
    const std::int64_t span = oldest->empty() ? 0 : run.token - (*oldest)[0].int64(0) + 1;
    if (span > 0 && span <= kept + slack) return {};
  }
  auto trimmed = session.run(st.history.trim, {{"name", run.key}, {"keep", kept}});
  if (!trimmed) return std::unexpected(trimmed.error());
  return {};
}

}  // namespace dblock::sql

#include "core/sql/lock_rows.hpp"

#include <algorithm>
#include <utility>

#include "core/semaphore.hpp"
#include "core/sql/sql_session.hpp"

namespace dblock::rows {

namespace {

using sql::tables::Type;

// A column of the row `row` ("" or an alias and its dot) as a select list reads it: a
// timestamp as epoch ms.
std::string selected(const sql::tables::Column& c, const EpochMs& epoch_ms, std::string_view row = "") {
  const std::string name = std::string(row) + std::string(c.name);
  return c.type == Type::timestamp ? epoch_ms(name) : name;
}

// The status columns of `row`; a Column::past one as NULL unless `past`.
std::string select_list(const EpochMs& epoch_ms, std::string_view now_expr, bool past, std::string_view row = "") {
  std::string sql;
  for (const sql::tables::Column& c : sql::tables::locks_columns)
    if (c.status) sql += (c.past && !past ? "NULL" : selected(c, epoch_ms, row)) + ", ";
  return sql + epoch_ms(now_expr);
}

}  // namespace

std::string status_select_list(const EpochMs& epoch_ms, std::string_view now_expr) { return select_list(epoch_ms, now_expr, true); }

std::string refusal_select_list(const EpochMs& epoch_ms, std::string_view now_expr, std::string_view row) {
  return select_list(epoch_ms, now_expr, false, row);
}

LockStatus::State state_of(const LockStatus& row, HolderVerdict verdict) {
  const auto strategy = parse_strategy(row.strategy);
  const bool released = row.released_at_ms.has_value();
  if (strategy && is_session_strategy(*strategy)) {
    if (!released && verdict.session_holds) return LockStatus::State::held;
    // Released, a --min-hold keeps it until its expires_at (session_take leaves it alone).
    return released && verdict.lease_live ? LockStatus::State::held : LockStatus::State::free;
  }
  if (verdict.lease_live) return LockStatus::State::held;
  if (!row.acquired_at_ms || released) return LockStatus::State::free;
  return LockStatus::State::expired;
}

std::string strategy_allows_sql(std::string_view row, std::string_view mine, std::string_view lease_over) {
  const std::string r(row);
  // A lease's take records the strategy 'lease' already: its lease's end is its own condition.
  const std::string lease_done =
      mine == "'lease'" ? std::string() : " OR (" + r + "strategy = 'lease' AND " + std::string(lease_over) + ")";
  // A row of no strategy counts as one of `mine` (COALESCE: one comparison for the DBA to read).
  return "(COALESCE(" + r + "strategy, " + std::string(mine) + ") = " + std::string(mine) + " OR " + r +
         "released_at IS NOT NULL OR " + r + "acquired_at IS NULL" + lease_done + ")";
}

bool other_strategy_holds(const LockStatus& row, bool lease_live, std::string_view asked) {
  if (row.strategy.empty() || row.strategy == asked || row.strategy == semaphore_marker) return false;
  if (row.released_at_ms || !row.acquired_at_ms) return false;
  return row.strategy != "lease" || lease_live;
}

sql::Params& bind_holder(sql::Params& params, const LockRequest& req) {
  return params.set("owner", req.owner).set("host", req.host).set("pid", std::int64_t{req.pid});
}

LockStatus decode_status(const ColumnReader& row) {
  using sql::tables::status_index;
  LockStatus s;
  s.key = row.text(status_index("name"));
  s.owner = row.text(status_index("owner"));
  s.host = row.text(status_index("host"));
  s.pid = row.opt_int64(status_index("pid")).value_or(0);
  s.token = row.opt_int64(status_index("token")).value_or(0);
  s.strategy = row.text(status_index("strategy"));
  s.acquired_at_ms = row.opt_int64(status_index("acquired_at"));
  s.renewed_at_ms = row.opt_int64(status_index("renewed_at"));
  s.expires_at_ms = row.opt_int64(status_index("expires_at"));
  s.released_at_ms = row.opt_int64(status_index("released_at"));
  s.last_started_at_ms = row.opt_int64(status_index("last_started_at"));
  s.last_finished_at_ms = row.opt_int64(status_index("last_finished_at"));
  if (auto code = row.opt_int64(status_index("last_exit_code"))) s.last_exit_code = static_cast<int>(*code);
  s.db_now_ms = row.opt_int64(sql::tables::status_columns()).value_or(0);
  if (auto strategy = parse_strategy(s.strategy); strategy && is_session_strategy(*strategy)) s.expires_at_ms.reset();
  return s;
}

LockStatus read_status(const ColumnReader& row, HolderVerdict verdict) {
  LockStatus s = decode_status(row);
  s.state = state_of(s, verdict);
  return s;
}

Result<std::vector<LockStatus>> in_request_order(std::vector<LockStatus> found, std::span<const std::string> keys,
                                                 const std::function<Result<std::int64_t>()>& now_ms) {
  if (keys.empty()) return found;
  std::vector<LockStatus> out;
  out.reserve(keys.size());
  std::optional<std::int64_t> now;
  if (!found.empty()) now = found.front().db_now_ms;
  for (const std::string& key : keys) {
    if (auto it = std::ranges::find(found, key, &LockStatus::key); it != found.end()) {
      out.push_back(*it);
      continue;
    }
    // Never taken: free at token 0, still stamped with the database's clock.
    if (!now) {
      auto read = now_ms();
      if (!read) return std::unexpected(read.error());
      now = *read;
    }
    LockStatus never_taken;
    never_taken.key = key;
    never_taken.db_now_ms = *now;
    out.push_back(std::move(never_taken));
  }
  return out;
}

std::string history_select_list(const EpochMs& epoch_ms) {
  std::string sql;
  for (const sql::tables::Column& c : sql::tables::runs_columns) sql += (sql.empty() ? "" : ", ") + selected(c, epoch_ms);
  return sql;
}

RunRecord decode_run(const ColumnReader& row) {
  using sql::tables::run_index;
  RunRecord r;
  r.id = row.opt_int64(run_index("id")).value_or(0);
  r.key = row.text(run_index("name"));
  r.token = row.opt_int64(run_index("token")).value_or(0);
  r.owner = row.text(run_index("owner"));
  r.host = row.text(run_index("host"));
  r.pid = row.opt_int64(run_index("pid")).value_or(0);
  r.strategy = row.text(run_index("strategy"));
  r.started_at_ms = row.opt_int64(run_index("started_at")).value_or(0);
  r.finished_at_ms = row.opt_int64(run_index("finished_at"));
  r.outcome = parse_run_outcome(row.text(run_index("outcome"))).value_or(RunOutcome::failed);
  if (auto code = row.opt_int64(run_index("exit_code"))) r.exit_code = static_cast<int>(*code);
  return r;
}

std::string describe(const HolderSelector& who) {
  if (who.force || (!who.owner && !who.token)) return "anyone";
  std::string text;
  if (who.owner) text = "owner " + *who.owner;
  if (who.token) text += (text.empty() ? "token " : " with token ") + std::to_string(*who.token);
  return text;
}

}  // namespace dblock::rows

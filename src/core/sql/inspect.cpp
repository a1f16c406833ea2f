#include "core/sql/inspect.hpp"
#include "core/sql/lock_rows.hpp"

#include <limits>
#include <nlohmann/json.hpp>

namespace dblock::sql {

LockStatus decode_status_row(const rows::ColumnReader& row) {
  constexpr int live = rows::status_column_count, holds = rows::status_column_count + 1;
  return rows::read_status(row, {.lease_live = row.opt_int64(live).value_or(0) != 0,
                                 .session_holds = row.opt_int64(holds).value_or(0) != 0});
}

Result<std::vector<LockStatus>> read_status(Session& session, const InspectStatements& st, std::span<const std::string> keys,
                                            StatusDecoder decode) {
  // Every key in one statement, whatever their number: a JSON array is one parameter. The
  // failover record (failover.hpp) is read along: a lock-delay in force blocks every key.
  std::vector<std::string> asked(keys.begin(), keys.end());
  asked.emplace_back(failover::record_name);
  auto r = keys.empty() ? session.run(st.status_all, {})
                        : session.run(st.status_keys, {{"keys", nlohmann::json(asked).dump()}});
  if (!r) return std::unexpected(r.error());
  std::vector<LockStatus> found;
  found.reserve(r->size());
  std::optional<LockDelay> delay;
  for (std::size_t i = 0; i < r->size(); ++i) {
    LockStatus row = decode((*r)[i]);
    if (row.key != failover::record_name) {
      found.push_back(std::move(row));
      continue;
    }
    if (row.expires_at_ms && *row.expires_at_ms > row.db_now_ms)
      delay = LockDelay{failover::describe(row.host, row.owner), *row.expires_at_ms, row.db_now_ms};
  }
  auto out = rows::in_request_order(std::move(found), keys, [&] { return read_now_ms(session, st); });
  if (out && delay)
    for (LockStatus& s : *out) s.lock_delay = delay;
  return out;
}

Result<std::vector<RunRecord>> read_history(Session& session, const InspectStatements& st, const std::string& key,
                                            int limit) {
  const Value rows_wanted = limit > 0 ? std::int64_t{limit} : std::numeric_limits<std::int64_t>::max();
  // Two statements, not `:name IS NULL OR name = :name`: with the OR a database walks the whole
  // table by id for one key; `name = :name` seeks the (name, id) index.
  auto r = key.empty() ? session.run(st.history_all, {{"limit", rows_wanted}})
                       : session.run(st.history_of, {{"name", key}, {"limit", rows_wanted}});
  if (!r) return std::unexpected(r.error());
  std::vector<RunRecord> out;
  out.reserve(r->size());
  for (std::size_t i = 0; i < r->size(); ++i) out.push_back(rows::decode_run((*r)[i]));
  return out;
}

Result<std::int64_t> read_now_ms(Session& session, const InspectStatements& st) {
  auto r = session.run(st.now_ms, {});
  if (!r) return std::unexpected(r.error());
  if (r->empty()) return fail(ErrorKind::internal, "the database clock read no row");
  return (*r)[0].int64(0);
}

Result<int> read_slot_count(Session& session, const InspectStatements& st, const std::string& key) {
  auto r = session.run(st.slot_count, {{"key", key}});
  if (!r) return std::unexpected(r.error());
  if (r->empty()) return 0;
  return static_cast<int>((*r)[0].opt_int64(0).value_or(0));
}

Result<std::int64_t> renew_named(Session& session, const InspectStatements& st, const std::string& key,
                                 const HolderSelector& who, Millis ttl) {
  if (!who.owner && !who.token) return fail(ErrorKind::usage, "renew needs the holder's owner or token");
  auto r = session.run(st.renew_named, {{"key", key},
                                        {"owner", who.owner ? Value(*who.owner) : Value()},
                                        {"token", value_of(who.token)},
                                        {"ttl_ms", ms_value(ttl)}});
  if (!r) return std::unexpected(r.error());
  if (r->empty() && r->affected > 0 && !st.renewed.empty())
    r = session.run(st.renewed, {{"key", key}, {"owner", who.owner ? Value(*who.owner) : Value()}, {"token", value_of(who.token)}});
  if (!r) return std::unexpected(r.error());
  if (r->empty()) return fail(ErrorKind::lost, "the lock " + key + " is not held by " + rows::describe(who));
  if (!st.renew_own.text.empty())
    if (auto own = session.run(st.renew_own, {{"key", key},
                                              {"owner", who.owner ? Value(*who.owner) : Value()},
                                              {"token", value_of(who.token)},
                                              {"ttl_ms", ms_value(ttl)}});
        !own)
      return std::unexpected(own.error());
  return (*r)[0].int64(0);
}

}  // namespace dblock::sql

// The history rows of ShedLock's locker (sqlite_shedlock.cpp).

#include "backends/sqlite/sqlite_tables.hpp"

namespace dblock::sqlite {

Result<void> record_run(const Connection& conn, const Tables& tables, int keep, const RunRecord& run,
                        const std::string& started_at) {
  auto insert = conn.prepare("INSERT INTO " + tables.runs +
                             " (name, token, owner, host, pid, strategy, started_at, finished_at, outcome, exit_code)"
                             " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, " +
                             now_sql() + ", ?8, ?9)");
  if (!insert) return std::unexpected(insert.error());
  insert->bind(1, std::string_view(run.key));
  insert->bind(2, run.token);
  insert->bind(3, std::string_view(run.owner));
  insert->bind(4, std::string_view(run.host));
  insert->bind(5, run.pid);
  insert->bind(6, std::string_view(run.strategy));
  if (started_at.empty()) insert->bind_null(7);
  else insert->bind(7, std::string_view(started_at));
  insert->bind(8, to_string(run.outcome));
  if (run.exit_code) insert->bind(9, static_cast<std::int64_t>(*run.exit_code));
  else insert->bind_null(9);
  if (auto ok = insert->run("recording the run of " + run.key); !ok) return ok;

  // The row at offset `keep` (newest first) is the newest one to go; everything older goes too.
  auto prune = conn.prepare("DELETE FROM " + tables.runs + " WHERE name = ?1 AND id <= (SELECT id FROM " +
                            tables.runs + " WHERE name = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)");
  if (!prune) return std::unexpected(prune.error());
  prune->bind(1, std::string_view(run.key));
  prune->bind(2, static_cast<std::int64_t>(keep < 0 ? 0 : keep));
  return prune->run("pruning the history of " + run.key);
}

}  // namespace dblock::sqlite

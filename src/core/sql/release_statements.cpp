// `dblock release` of another process's holder (statements.hpp, ReleaseStatements), written once
// and rendered through the dialect's expressions (rules.hpp, Dialect); the dialect adds only how
// a server session is ended.

#include "core/sql/lock_rows.hpp"
#include "core/sql/rules.hpp"

namespace dblock::sql {

ReleaseStatements release_statements(const Dialect& d, const Tables& t) {
  // The named holder's unreleased row; --force: whoever holds it, a --min-hold that a finished
  // holder left behind included (the key is free when the command returns).
  const std::string marked = "l.name = :key AND (" + d.integer(":force") + " = 1 AND (l.released_at IS NULL OR " +
                             d.lease_live("l.", d.now) + ") OR l.released_at IS NULL AND " + named_holder_sql(d, "l.") + ")";
  // A running lease ends now, truncated to the millisecond, never rounded up into the column's
  // precision: the key must read free right after.
  const std::string now_ms = time_of_ms_sql(d, epoch_ms_sql(d, d.now));
  const std::string release = "UPDATE " + t.locks + " AS l SET released_at = " + d.now + ", expires_at = CASE WHEN " +
                              d.lease_live("l.", d.now) + " THEN " + now_ms + " ELSE l.expires_at END" +
                              more_assignments(d.own_lease.end("")) + " WHERE " + marked;
  ReleaseStatements s;
  s.release = {"release.release", release};
  const std::string returned = d.returning("l.*");
  if (d.ended_session("l", t).empty()) return s;
  // Where the release returns no rows, the holder is read before it; else the rows it released
  // are answered in the same statement.
  if (returned.empty())
    s.holder = {"release.holder", d.ended_session(t.locks + " l WHERE " + marked, t)};
  else
    s.release.text = "WITH released AS (" + release + returned + ") " + d.ended_session("released l", t);
  return s;
}

namespace {

// The trim of the key's rows beyond the newest :keep, once the oldest row's token is more than
// :keep + :slack below this run's (record_run's rule), as the part `d` of a statement that adds
// the run's row in another part. Every part of one statement reads the snapshot from before
// it, so the trim counts the new row apart: the old rows beyond the newest :keep - 1 go. The
// subqueries of the trim's WHERE are evaluated only when the one-time test on the oldest row
// lets the scan start.
std::string history_trim(const Dialect& d, const Tables& t) {
  const HistoryStatements h = history_statements(d, t.runs);
  const std::string keep = d.integer(":keep");
  const std::string trim_due = "EXISTS (SELECT 1 FROM (" + h.oldest.text + ") o WHERE " + d.integer(":token") +
                               " - o.token + 1 NOT BETWEEN 1 AND " + keep + " + " + d.integer(":slack") + ")";
  return "d AS (DELETE FROM " + t.runs + " WHERE " + trim_due + " AND name = :name AND id <= (SELECT id FROM " +
         t.runs + " WHERE name = :name ORDER BY id DESC LIMIT 1 OFFSET " + keep + " - 1)" + d.returning("1") + ")";
}

}  // namespace

Statement history_record(const Dialect& d, const Tables& t) {
  if (d.unsynced_commit.empty()) return {};
  const HistoryStatements h = history_statements(d, t.runs);
  return {"history.record", "WITH a AS (" + h.add.text + d.returning("1") + "), " + history_trim(d, t) +
                                " SELECT (SELECT count(*) FROM a), (SELECT count(*) FROM d), " + d.unsynced_commit};
}

// The parts run in order where one reads another's rows: the release, `between`, then the
// history row, which reads their answer for its outcome. The statement's form (parts that
// write, the casts of a boolean and of the exit code to int) is that of the dialects that give
// unsynced_commit: PostgreSQL's.
Statement release_recorded(const Dialect& d, const Tables& t, const Statement& release, std::string id,
                           const std::string& between) {
  if (d.unsynced_commit.empty()) return {};
  const std::string ours = between.empty() ? "EXISTS (SELECT 1 FROM u)" : "(SELECT ours FROM g)";
  return {std::move(id),
          "WITH u AS (" + release.text + "), " + (between.empty() ? "" : between + ", ") + "a AS (INSERT INTO " +
              t.runs + " (name, token, owner, host, pid, strategy, started_at, finished_at, outcome, exit_code)"
              " SELECT :name, " + d.integer(":token") + ", :run_owner, :run_host, " + d.integer(":run_pid") +
              ", :strategy, " + time_of_ms_sql(d, d.integer(":started_ms")) + ", " + d.now + ", CASE WHEN " + ours +
              " THEN :outcome ELSE 'lost' END, " + d.integer(":run_exit_code") + d.returning("1") + "), " +
              history_trim(d, t) + " SELECT (SELECT count(*) FROM u), CASE WHEN " + ours + " THEN 1 ELSE 0 END"};
}

}  // namespace dblock::sql

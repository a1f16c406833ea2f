// `dblock release` of another process's holder (statements.hpp, ReleaseStatements), written once
// and rendered through the dialect's expressions (rules.hpp, Dialect); the dialect adds only how
// a server session is ended.

#include "core/sql/lock_rows.hpp"
#include "core/sql/rules.hpp"

namespace dblock::sql {

ReleaseStatements release_statements(const Dialect& d, const Tables& t) {
  // The named holder's unreleased row; --force: whoever holds it, a --min-hold that a finished
  // holder left behind included (the key is free when the command returns).
  const std::string marked = "l.name = :key AND (:force = 1 AND (l.released_at IS NULL OR " +
                             d.lease_live("l.", d.now) + ") OR l.released_at IS NULL AND " + named_holder_sql("l.") + ")";
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
  // The holder's session ended (:session) once the server no longer shows it holding the key's
  // lock: then the key can be taken. Where the server tells a lock's holder
  // (SessionLock::holder), on the lock the release named (:lock, as ended_session answered it:
  // a row lock's holder tag, which its session gives back only after its transaction, the row
  // lock with it); else judged as the release judged it (Dialect::session_holds) on the key's
  // row with that session, one row even where the row is gone.
  const SessionLock& l = d.session_lock;
  s.session_gone = {"release.session_gone",
                    l.holder ? "SELECT CASE WHEN " + l.holder(":lock") + " = :session THEN 0 ELSE 1 END"
                             : "SELECT CASE WHEN EXISTS (SELECT 1 FROM (SELECT name, strategy, :session AS session_id FROM " +
                                   t.locks + " WHERE name = :key) l WHERE " + d.session_holds("l.", t) + " = 1) THEN 0 ELSE 1 END"};
  // Where the release returns no rows, the holder is read before it; else the rows it released
  // are answered in the same statement.
  if (returned.empty())
    s.holder = {"release.holder", d.ended_session(t.locks + " l WHERE " + marked, t)};
  else
    s.release.text = "WITH released AS (" + release + returned + ") " + d.ended_session("released l", t);
  return s;
}

namespace {

// record_run's rule, as the condition of a statement or block that adds the run's row: the
// oldest row's token more than :keep + :slack below this run's (where the key has no row there
// is nothing to trim, and the answer does not matter). The subquery reads no column of the
// statement's rows: it is evaluated once.
std::string history_trim_due_sql(const Dialect& d, const Tables& t) {
  const HistoryStatements h = history_statements(d, t.runs);
  return "COALESCE(:token - (" + h.oldest.text + ") + 1, 0) NOT BETWEEN 1 AND :keep" +
         " + :slack";
}

// The trim of the key's rows beyond the newest :keep, once history_trim_due_sql holds, as the
// part `d` of a statement that adds the run's row in another part. Every part of one statement
// reads the snapshot from before it, so the trim counts the new row apart: the old rows beyond
// the newest :keep - 1 go. The subqueries of the trim's WHERE are evaluated only when the
// one-time test on the oldest row lets the scan start.
std::string history_trim(const Dialect& d, const Tables& t) {
  const std::string keep = ":keep";
  return "d AS (DELETE FROM " + t.runs + " WHERE " + history_trim_due_sql(d, t) + " AND name = :name AND id <= (SELECT id FROM " +
         t.runs + " WHERE name = :name ORDER BY id DESC LIMIT 1 OFFSET " + keep + " - 1)" + d.returning("1") + ")";
}

}  // namespace

// The rows beyond the newest :keep go, the new one among them (history.trim).
std::string history_trim_block_sql(const Dialect& d, const Tables& t) {
  return "IF " + history_trim_due_sql(d, t) + " THEN " + history_statements(d, t.runs).trim.text + "; END IF;";
}

std::string run_row_sql(const Dialect& d, const Tables& t, std::string_view ours) {
  return "INSERT INTO " + t.runs + " (name, token, owner, host, pid, strategy, started_at, finished_at, outcome, exit_code)"
         " SELECT :name, :token, :run_owner, :run_host, :run_pid" + ", :strategy, " +
         time_of_ms_sql(d, ":started_ms") + ", " + d.now + ", CASE WHEN " + std::string(ours) +
         " THEN :outcome ELSE 'lost' END, :run_exit_code";
}

Statement history_record(const Dialect& d, const Tables& t) {
  const HistoryStatements h = history_statements(d, t.runs);
  if (d.unsynced_commit.empty()) {
    if (!d.block) return {};
    return {"history.record", d.block("", "START TRANSACTION; " + h.add.text + "; " + history_trim_block_sql(d, t) + " COMMIT;")};
  }
  return {"history.record", "WITH a AS (" + h.add.text + d.returning("1") + "), " + history_trim(d, t) +
                                " SELECT (SELECT count(*) FROM a), (SELECT count(*) FROM d), " + d.unsynced_commit};
}

// The parts run in order where one reads another's rows: the release, `between`, then the
// history row, which reads their answer for its outcome. The statement's form (parts that
// write, the casts of a boolean and of the exit code to int) is that of the dialects that give
// unsynced_commit: PostgreSQL's. A block's statements run in order, the release's row count
// kept for the history row's outcome and the answer; its commit waits for the disk.
Statement release_recorded(const Dialect& d, const Tables& t, const Statement& release, std::string id,
                           const std::string& between) {
  if (d.unsynced_commit.empty()) {
    if (!d.block || !between.empty()) return {};
    // Where waiters hear a release by the session lock alone (wake_statements), the key's wake
    // name and queue go back right before the COMMIT, whose disk wait then overlaps the woken
    // waiter's take: that take waits for the row's lock, which the COMMIT gives back before its
    // disk wait (InnoDB's), so it finds the row released, and its own durable commit flushes the
    // release with it. Given back after the COMMIT, the handoff waited for both disk flushes in
    // turn. Naming :wake_given_back tells the session's wake primitive so.
    const SessionLock& l = d.session_lock;
    const bool wakes = wakes_by_session_lock(l);
    const std::string woken =
        wakes ? "SET woken = " + l.unlock(":wake_given_back") + ", queued = " + l.unlock(":queue") + "; " : "";
    return {std::move(id), d.block(wakes ? "DECLARE released_rows, woken, queued INT; " : "DECLARE released_rows INT; ",
                                   "START TRANSACTION; " + release.text + "; GET DIAGNOSTICS released_rows = ROW_COUNT; " +
                                       run_row_sql(d, t, "released_rows > 0") + "; " + history_trim_block_sql(d, t) + " " +
                                       woken + "COMMIT; SELECT released_rows, CASE WHEN released_rows > 0 THEN 1 ELSE 0 END" +
                                       (wakes ? ", woken, queued" : "") + ";")};
  }
  const std::string ours = between.empty() ? "EXISTS (SELECT 1 FROM u)" : "(SELECT ours FROM g)";
  return {std::move(id), "WITH u AS (" + release.text + "), " + (between.empty() ? "" : between + ", ") + "a AS (" +
                             run_row_sql(d, t, ours) + d.returning("1") + "), " + history_trim(d, t) +
                             " SELECT (SELECT count(*) FROM u), CASE WHEN " + ours + " THEN 1 ELSE 0 END"};
}

}  // namespace dblock::sql

// The PostgreSQL dialect's statements for the strategies of src/backends/common (statements.hpp
// has each one's contract). "Now" is the server's now(), the transaction's start; parameters
// arrive as text, so every number is cast where it is used.

#include "backends/common/lock_rows.hpp"
#include "backends/postgres/postgres_tables.hpp"

namespace dblock::postgres {

sql::LeaseStatements lease_statements(const std::string& prefix) {
  const Tables t = tables_for(prefix);
  const std::string status_columns = rows::status_select_list(&ms, "now()");
  sql::LeaseStatements s;
  s.begin = "BEGIN";
  // Only the acquisition must survive a crash: a release lost in one leaves a lease to expire,
  // and the next acquirer's synchronous commit flushes the WAL up to its own token first.
  s.begin_release = "BEGIN; SET LOCAL synchronous_commit = off";

  // A live lease, as the statement's snapshot sees it, is refused without locking the row: the
  // many waiters a release wakes do not queue on the row lock behind the one that wins.
  s.take = {"lease.take",
            "INSERT INTO " + t.locks +
                " AS l (name, owner, host, pid, token, strategy, session_id, acquired_at, renewed_at, expires_at,"
                " released_at, last_started_at)"
                " SELECT :key, :owner, :host, :pid::bigint, COALESCE(:token::bigint, 1), 'lease', NULL, now(), now(),"
                " now() + :ttl_ms::bigint * interval '1 ms', NULL, now()"
                " WHERE NOT EXISTS (SELECT 1 FROM " + t.locks + " WHERE name = :key AND expires_at > now())"
                " ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, host = EXCLUDED.host, pid = EXCLUDED.pid,"
                " token = COALESCE(:token::bigint, l.token + 1), strategy = 'lease', session_id = NULL,"
                " acquired_at = now(), renewed_at = now(), expires_at = EXCLUDED.expires_at, released_at = NULL,"
                " last_started_at = now()"
                " WHERE (l.expires_at IS NULL OR l.expires_at <= now()) AND (:min_interval_ms::bigint <= 0"
                " OR l.last_started_at IS NULL OR l.last_started_at <= now() - :min_interval_ms::bigint * interval '1 ms')"
                " RETURNING token, " + ms("acquired_at") + ", " + ms("expires_at")};
  s.taken = {"lease.taken", "SELECT token, " + ms("acquired_at") + ", " + ms("expires_at") + " FROM " + t.locks +
                                " WHERE name = :key AND owner = :owner"};
  s.refusal = {"lease.refusal",
               "SELECT " + status_columns + ", COALESCE((expires_at > now())::int, 0),"
               " CASE WHEN :min_interval_ms::bigint > 0 THEN " +
                   ms("last_started_at + :min_interval_ms::bigint * interval '1 ms'") + " - " + ms("now()") +
                   " END FROM " + t.locks + " WHERE name = :key"};
  s.renew = {"lease.renew", "UPDATE " + t.locks +
                                " SET expires_at = now() + :ttl_ms::bigint * interval '1 ms', renewed_at = now()"
                                " WHERE name = :key AND owner = :owner AND token = :token::bigint AND released_at IS NULL"};
  // timestamptz(3) rounds to the nearest ms: a plain now() could be stored up to 0.5 ms in the
  // future and a status read right after the release would still say held; so could
  // acquired_at, which is therefore used only with --min-hold. The NOTIFY wakes the key's
  // waiters once the release commits.
  s.release = {"lease.release",
               "UPDATE " + t.locks +
                   " SET released_at = now(), expires_at = CASE WHEN :min_hold_ms::bigint > 0"
                   " THEN GREATEST(date_trunc('milliseconds', now()), acquired_at + :min_hold_ms::bigint * interval '1 ms')"
                   " ELSE date_trunc('milliseconds', now()) END,"
                   " last_finished_at = CASE WHEN :finished::int = 1 THEN now() ELSE last_finished_at END,"
                   " last_exit_code = CASE WHEN :finished::int = 1 THEN :exit_code::int ELSE last_exit_code END"
                   " WHERE name = :key AND owner = :owner AND token = :token::bigint AND released_at IS NULL"
                   " RETURNING pg_notify(:channel, name)"};
  s.history_add = {"history.add",
                   "INSERT INTO " + t.runs +
                       " (name, token, owner, host, pid, strategy, started_at, finished_at, outcome, exit_code)"
                       " VALUES (:name, :token::bigint, :owner, :host, :pid::bigint, :strategy,"
                       " timestamptz 'epoch' + :started_ms::bigint * interval '1 ms', now(), :outcome, :exit_code::int)"};
  // The row at offset :keep (newest first) is the newest one to go; everything older goes too:
  // a seek of the (name, id) index from the newest end, as far as that row.
  s.history_trim = {"history.trim", "DELETE FROM " + t.runs + " WHERE name = :name AND id <= (SELECT id FROM " + t.runs +
                                        " WHERE name = :name ORDER BY id DESC OFFSET :keep::bigint LIMIT 1)"};

  // Far in the future, not 'infinity': a plain lease finds the header held, and its time still
  // converts to epoch milliseconds.
  s.header_take = {
      "semaphore.header_take",
      "INSERT INTO " + t.locks +
          " AS l (name, owner, host, pid, token, strategy, session_id, acquired_at, renewed_at, expires_at,"
          " released_at, last_started_at, slots) VALUES (:key, :owner, :host, :pid::bigint, 1, 'semaphore', NULL,"
          " now(), now(), timestamptz '9999-12-31 00:00:00+00', NULL, now(), :slots::int)"
          " ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, host = EXCLUDED.host, pid = EXCLUDED.pid,"
          " token = l.token + 1, strategy = 'semaphore', session_id = NULL, acquired_at = now(), renewed_at = now(),"
          " expires_at = EXCLUDED.expires_at, released_at = NULL, last_started_at = now(), slots = EXCLUDED.slots"
          " WHERE CASE WHEN l.slots IS NULL THEN l.released_at IS NOT NULL OR l.acquired_at IS NULL"
          " OR (l.strategy = 'lease' AND l.expires_at <= now())"
          " ELSE l.slots = EXCLUDED.slots OR NOT EXISTS (SELECT 1 FROM " + t.locks +
          " s WHERE s.name > :first AND s.name < :past AND s.released_at IS NULL"
          " AND (s.strategy IS DISTINCT FROM 'lease' OR s.expires_at > now())) END"
          " RETURNING token, " + ms("acquired_at") + ", " + ms("expires_at")};
  s.header_refusal = {"semaphore.header_refusal", "SELECT " + status_columns +
                                                      ", COALESCE((expires_at > now())::int, 0), slots FROM " +
                                                      t.locks + " WHERE name = :key"};
  s.lock_row = {"lock_row", "SELECT 1 FROM " + t.locks + " WHERE name = :key FOR UPDATE"};
  return s;
}

}  // namespace dblock::postgres

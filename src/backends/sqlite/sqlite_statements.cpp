// The SQLite dialect's statements for the strategies of src/backends/common (statements.hpp
// has each one's contract). There is no server clock: leases and --min-interval are judged on
// CLOCK_BOOTTIME with the boot id, through dblock_boot_ms() / dblock_boot_id()
// (sqlite_tables.hpp); the wall-clock columns are for display and history.

#include "backends/sqlite/sqlite_tables.hpp"

namespace dblock::sqlite {
namespace {

/// Milliseconds since the row's last start, for --min-interval: CLOCK_BOOTTIME within one
/// boot; across a reboot only the wall clock spans the gap. `a` is "" or an alias and its dot.
std::string started_ago_sql(const std::string& a) {
  return "(CASE WHEN " + boot_judged_sql(a) + " AND " + a + "boot_id = dblock_boot_id() AND " + a +
         "boot_started_ms IS NOT NULL THEN dblock_boot_ms() - " + a + "boot_started_ms ELSE " + now_ms_sql() + " - " +
         epoch_ms_sql(a + "last_started_at") + " END)";
}

std::string epoch_ms_sql_text(std::string_view expr) { return epoch_ms_sql(expr); }

}  // namespace

sql::LeaseStatements lease_statements(const std::string& prefix) {
  const Tables t(prefix);
  const std::string now = now_sql();
  sql::LeaseStatements s;
  s.begin = "BEGIN IMMEDIATE";
  // Only the acquisition carries a token that must survive a power loss. A lost release leaves
  // a lease that is over after the reboot anyway (a lease from an earlier boot is expired), and
  // the next acquisition's fsync of the WAL makes this commit durable too: one fsync per run.
  s.begin_release = std::string(begin_unsynced);

  s.take = {"lease.take",
            "INSERT INTO " + t.locks +
                " AS l (name, owner, host, pid, token, strategy, session_id, acquired_at, renewed_at, expires_at,"
                " released_at, last_started_at, boot_id, boot_token, boot_started_ms, boot_expires_ms)"
                " VALUES (:key, :owner, :host, :pid, COALESCE(:token, 1), 'lease', NULL, " + now + ", " + now + ", " +
                now_plus_sql(":ttl_ms") + ", NULL, " + now +
                ", dblock_boot_id(), COALESCE(:token, 1), dblock_boot_ms(), dblock_boot_ms() + :ttl_ms)"
                " ON CONFLICT(name) DO UPDATE SET owner = excluded.owner, host = excluded.host, pid = excluded.pid,"
                " token = COALESCE(:token, l.token + 1), strategy = excluded.strategy, session_id = NULL,"
                " acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at,"
                " expires_at = excluded.expires_at, released_at = NULL, last_started_at = excluded.last_started_at,"
                " boot_id = excluded.boot_id, boot_token = COALESCE(:token, l.token + 1),"
                " boot_started_ms = excluded.boot_started_ms, boot_expires_ms = excluded.boot_expires_ms"
                " WHERE NOT " + lease_live_sql("l.") +
                " AND (:min_interval_ms <= 0 OR l.last_started_at IS NULL OR " + started_ago_sql("l.") +
                " >= :min_interval_ms)"
                " RETURNING token, " + epoch_ms_sql("acquired_at") + ", " + epoch_ms_sql("expires_at")};
  s.refusal = {"lease.refusal",
               status_select(t, "CASE WHEN :min_interval_ms > 0 AND last_started_at IS NOT NULL THEN :min_interval_ms - " +
                                    started_ago_sql("") + " END") +
                   " WHERE name = :key"};
  s.renew = {"lease.renew", "UPDATE " + t.locks + " SET expires_at = " + now_plus_sql(":ttl_ms") +
                                ", renewed_at = " + now + ", " + renew_boot_sql(":ttl_ms") +
                                " WHERE name = :key AND owner = :owner AND token = :token AND released_at IS NULL"};
  s.release = {"lease.release",
               "UPDATE " + t.locks + " SET released_at = " + now + ", expires_at = CASE WHEN " +
                   epoch_ms_sql("acquired_at") + " + :min_hold_ms > " + now_ms_sql() +
                   " THEN strftime('%Y-%m-%d %H:%M:%f', julianday(acquired_at) + :min_hold_ms / 86400000.0) ELSE " + now +
                   " END, boot_expires_ms = MAX(dblock_boot_ms(), boot_started_ms + :min_hold_ms),"
                   " last_finished_at = CASE WHEN :finished THEN " + now + " ELSE last_finished_at END,"
                   " last_exit_code = CASE WHEN :finished THEN :exit_code ELSE last_exit_code END"
                   " WHERE name = :key AND owner = :owner AND token = :token AND released_at IS NULL"};
  s.history_add = {"history.add",
                   "INSERT INTO " + t.runs +
                       " (name, token, owner, host, pid, strategy, started_at, finished_at, outcome, exit_code)"
                       " VALUES (:name, :token, :owner, :host, :pid, :strategy,"
                       " strftime('%Y-%m-%d %H:%M:%f', :started_ms / 1000.0, 'unixepoch'), " + now +
                       ", :outcome, :exit_code)"};
  // The row at offset :keep (newest first) is the newest one to go; everything older goes too.
  s.history_trim = {"history.trim", "DELETE FROM " + t.runs + " WHERE name = :name AND id <= (SELECT id FROM " + t.runs +
                                        " WHERE name = :name ORDER BY id DESC LIMIT 1 OFFSET :keep)"};

  const std::string slot_held = "EXISTS (SELECT 1 FROM " + t.locks +
                                " AS s WHERE s.name > :first AND s.name < :past AND s.released_at IS NULL AND"
                                " (s.strategy IS NOT 'lease' OR " + lease_live_sql("s.") + "))";
  s.header_take = {
      "semaphore.header_take",
      "INSERT INTO " + t.locks +
          " AS l (name, owner, host, pid, token, strategy, session_id, acquired_at, renewed_at, expires_at,"
          " released_at, last_started_at, slots) VALUES (:key, :owner, :host, :pid, 1, 'semaphore', NULL, " + now +
          ", " + now + ", '9999-12-31 23:59:59.999', NULL, " + now +
          ", :slots) ON CONFLICT(name) DO UPDATE SET owner = excluded.owner,"
          " host = excluded.host, pid = excluded.pid, token = l.token + 1, strategy = 'semaphore', session_id = NULL,"
          " acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at, expires_at = excluded.expires_at,"
          " released_at = NULL, last_started_at = excluded.last_started_at, slots = excluded.slots, boot_id = NULL,"
          " boot_token = NULL, boot_started_ms = NULL, boot_expires_ms = NULL"
          " WHERE CASE WHEN l.slots IS NULL THEN l.released_at IS NOT NULL OR l.acquired_at IS NULL OR"
          " (l.strategy IS 'lease' AND NOT " + lease_live_sql("l.") + ") ELSE l.slots = :slots OR NOT " + slot_held +
          " END RETURNING token, NULL, NULL"};
  s.header_refusal = {"semaphore.header_refusal", status_select(t, "slots") + " WHERE name = :key"};
  s.lock_row = {"lock_row", "SELECT 1 FROM " + t.locks + " WHERE name = :key"};
  return s;
}

sql::ShedlockStatements shedlock_statements(const BackendOptions& options) {
  const Tables t(options.table_prefix);
  const std::string shed = quote_ident(options.shedlock_table);
  const std::string now = now_sql();
  const std::string at_least = "strftime('%Y-%m-%d %H:%M:%f', julianday(locked_at) + :min_hold_ms / 86400000.0)";
  sql::ShedlockStatements s;
  s.begin = "BEGIN IMMEDIATE";
  // Times are UTC text 'YYYY-MM-DD HH:MM:SS.SSS', so they compare as text. SQLite has no server
  // clock, so unlike dblock's own lease this one is judged on the wall clock, as the Java side would.
  s.take = {"shedlock.take", "INSERT INTO " + shed + " AS s (name, lock_until, locked_at, locked_by) VALUES (:key, " +
                                 now_plus_sql(":ttl_ms") + ", " + now +
                                 ", :owner) ON CONFLICT(name) DO UPDATE SET lock_until = excluded.lock_until,"
                                 " locked_at = excluded.locked_at, locked_by = excluded.locked_by WHERE s.lock_until <= " +
                                 now + " RETURNING " + epoch_ms_sql("lock_until")};
  s.number = {"shedlock.number",
              "INSERT INTO " + t.locks +
                  " AS l (name, owner, host, pid, token, strategy, acquired_at, renewed_at, released_at, last_started_at)"
                  " VALUES (:key, :owner, :host, :pid, 1, 'shedlock', " + now + ", " + now + ", NULL, " + now +
                  ") ON CONFLICT(name) DO UPDATE SET owner = excluded.owner, host = excluded.host, pid = excluded.pid,"
                  " token = l.token + 1, strategy = 'shedlock', session_id = NULL, acquired_at = excluded.acquired_at,"
                  " renewed_at = excluded.renewed_at, expires_at = NULL, released_at = NULL,"
                  " last_started_at = excluded.last_started_at RETURNING token, " + epoch_ms_sql("acquired_at")};
  s.holder = {"shedlock.holder", shedlock_status_select(options) + " WHERE name = :key"};
  s.extend = {"shedlock.extend", "UPDATE " + shed + " SET lock_until = " + now_plus_sql(":ttl_ms") +
                                     " WHERE name = :key AND locked_by = :owner AND lock_until > " + now};
  s.unlock = {"shedlock.unlock", "UPDATE " + shed + " SET lock_until = CASE WHEN " + at_least + " > " + now + " THEN " +
                                     at_least + " ELSE " + now + " END WHERE name = :key AND locked_by = :owner"};
  s.finish = {"shedlock.finish",
              "UPDATE " + t.locks + " SET released_at = " + now + ", last_finished_at = CASE WHEN :finished THEN " + now +
                  " ELSE last_finished_at END, last_exit_code = CASE WHEN :finished THEN :exit_code ELSE last_exit_code END"
                  " WHERE name = :key AND token = :token AND released_at IS NULL"};
  return s;
}

sql::InspectStatements inspect_statements(const BackendOptions& options, bool without_boot_columns) {
  Tables t(options.table_prefix);
  // A table from an older dblock lacks the boot_* columns, which a read-only inspection cannot
  // add: its rows are read as that dblock wrote them (the wall-clock rule).
  if (without_boot_columns) t.locks = locks_without_boot_columns(options.table_prefix);
  const std::string now = now_sql();
  const std::string rows_of = options.shedlock ? shedlock_status_select(options) : status_select(t, "0");
  const std::string history = "SELECT " + rows::history_select_list(&epoch_ms_sql_text) + " FROM " + t.runs;
  sql::InspectStatements s;
  s.status_all = {"inspect.status_all", rows_of + " ORDER BY name"};
  s.status_keys = {"inspect.status_keys", rows_of + " WHERE name IN (SELECT value FROM json_each(:keys)) ORDER BY name"};
  s.history_all = {"inspect.history_all", history + " ORDER BY id DESC LIMIT :limit"};
  s.history_of = {"inspect.history_of", history + " WHERE name = :name ORDER BY id DESC LIMIT :limit"};
  s.now_ms = {"inspect.now_ms", "SELECT " + now_ms_sql()};
  s.slot_count = {"inspect.slot_count", "SELECT slots FROM " + t.locks + " WHERE name = :key"};
  // ShedLock knows only locked_by, so a token names the owner of dblock's row with that token.
  const std::string shed = quote_ident(options.shedlock_table);
  s.renew_named = options.shedlock
                      ? sql::Statement{"inspect.renew_named",
                                       "UPDATE " + shed + " SET lock_until = " + now_plus_sql(":ttl_ms") +
                                           " WHERE name = :key AND (:owner IS NULL OR locked_by = :owner) AND (:token IS NULL"
                                           " OR locked_by = (SELECT owner FROM " + t.locks +
                                           " WHERE name = :key AND token = :token AND strategy = 'shedlock'))"
                                           " AND lock_until > " + now + " RETURNING " + epoch_ms_sql("lock_until")}
                      : sql::Statement{"inspect.renew_named",
                                       "UPDATE " + t.locks + " SET expires_at = " + now_plus_sql(":ttl_ms") +
                                           ", renewed_at = " + now + ", " + renew_boot_sql(":ttl_ms") +
                                           " WHERE name = :key AND released_at IS NULL AND (:owner IS NULL OR owner = :owner)"
                                           " AND (:token IS NULL OR token = :token) RETURNING " + epoch_ms_sql("expires_at")};
  return s;
}

}  // namespace dblock::sqlite

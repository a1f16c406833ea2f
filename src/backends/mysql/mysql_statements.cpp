// The MySQL/MariaDB dialect's statements for the strategies of src/backends/common
// (statements.hpp has each one's contract). Every DATETIME is UTC (each session runs with
// time_zone '+00:00'); durations arrive in ms and become INTERVAL ... * 1000 MICROSECOND.
//
// An upsert's ON DUPLICATE KEY UPDATE takes a row only when its condition holds, each column
// IF(cond, new, old). MySQL assigns left to right, each assignment seeing the ones before
// (MariaDB may assign from the old row): the columns a condition reads are assigned last, so
// it reads the same in every assignment. Affected rows tell what happened (1 inserted, 2 taken,
// 0 left alone); MariaDB has no RETURNING here, so the common locker reads the row (`taken`).

#include "backends/common/lock_rows.hpp"
#include "backends/mysql/mysql_tables.hpp"

namespace dblock::mysql {
namespace {

std::string epoch_ms_of(std::string_view expr) { return epoch_ms(std::string(expr)); }

// "column = IF(cond, value, column)" for each pair, comma-separated.
std::string assign_each_if(const std::string& cond, std::initializer_list<std::pair<const char*, const char*>> columns) {
  std::string out;
  for (const auto& [column, value] : columns)
    out += std::string(out.empty() ? "" : ", ") + column + " = IF(" + cond + ", " + value + ", " + column + ")";
  return out;
}

}  // namespace

sql::LeaseStatements lease_statements(const std::string& prefix) {
  const Tables t = make_tables(prefix);
  const std::string status = rows::status_select_list(&epoch_ms_of, "NOW(6)") + ", COALESCE(expires_at > NOW(6), 0)";
  sql::LeaseStatements s;
  s.begin = "START TRANSACTION";
  s.begin_release = "START TRANSACTION";

  // Free: the lease ended (or a session strategy left expires_at NULL) and, with
  // --min-interval, the last start is old enough. last_started_at cannot re-test that on the
  // new expires_at; it recognises this statement's own takeover (acquired_at and expires_at
  // just set) instead. (A row someone else took in the same microsecond with the same TTL
  // already has last_started_at = NOW(6).)
  const std::string due =
      "(:min_interval_ms <= 0 OR last_started_at IS NULL OR last_started_at <= NOW(6) - INTERVAL :min_interval_ms * 1000 MICROSECOND)";
  const std::string free = "((expires_at IS NULL OR expires_at <= NOW(6)) AND " + due + ")";
  s.take = {"lease.take",
            "INSERT INTO " + t.locks +
                " (name, owner, host, pid, token, strategy, session_id, acquired_at, renewed_at, expires_at, released_at,"
                " last_started_at) VALUES (:key, :owner, :host, :pid, COALESCE(:token, 1), 'lease', NULL, NOW(6), NOW(6),"
                " NOW(6) + INTERVAL :ttl_ms * 1000 MICROSECOND, NULL, NOW(6)) ON DUPLICATE KEY UPDATE " +
                assign_each_if(free, {{"owner", "VALUES(owner)"},
                                 {"host", "VALUES(host)"},
                                 {"pid", "VALUES(pid)"},
                                 {"strategy", "'lease'"},
                                 {"session_id", "NULL"},
                                 {"acquired_at", "NOW(6)"},
                                 {"renewed_at", "NOW(6)"},
                                 {"released_at", "NULL"},
                                 {"token", "COALESCE(:token, token + 1)"},
                                 {"expires_at", "VALUES(expires_at)"}}) +
                ", last_started_at = IF(" + due +
                " AND ((expires_at IS NULL OR expires_at <= NOW(6)) OR"
                " (acquired_at <=> NOW(6) AND expires_at <=> VALUES(expires_at))), NOW(6), last_started_at)"};
  s.taken = {"lease.taken", "SELECT token, " + epoch_ms("acquired_at") + ", " + epoch_ms("expires_at") + " FROM " +
                                t.locks + " WHERE name = :key AND owner = :owner"};
  s.refusal = {"lease.refusal", "SELECT " + status +
                                    ", CASE WHEN :min_interval_ms > 0 AND last_started_at IS NOT NULL THEN " +
                                    epoch_ms("last_started_at + INTERVAL :min_interval_ms * 1000 MICROSECOND") + " - " +
                                    epoch_ms("NOW(6)") + " END FROM " + t.locks + " WHERE name = :key"};
  s.renew = {"lease.renew", "UPDATE " + t.locks +
                                " SET renewed_at = NOW(6), expires_at = NOW(6) + INTERVAL :ttl_ms * 1000 MICROSECOND"
                                " WHERE name = :key AND owner = :owner AND token = :token AND released_at IS NULL"};
  s.release = {"lease.release",
               "UPDATE " + t.locks +
                   " SET released_at = NOW(6), expires_at = GREATEST(NOW(6), acquired_at + INTERVAL :min_hold_ms * 1000 MICROSECOND),"
                   " last_finished_at = IF(:finished, NOW(6), last_finished_at),"
                   " last_exit_code = IF(:finished, :exit_code, last_exit_code)"
                   " WHERE name = :key AND owner = :owner AND token = :token AND released_at IS NULL"};
  s.history_add = {"history.add",
                   "INSERT INTO " + t.runs +
                       " (name, token, owner, host, pid, strategy, started_at, finished_at, outcome, exit_code)"
                       " VALUES (:name, :token, :owner, :host, :pid, :strategy,"
                       " TIMESTAMPADD(MICROSECOND, :started_ms * 1000, '1970-01-01'), NOW(6), :outcome, :exit_code)"};
  // The derived table lets MySQL read the table it deletes from; the cutoff is found on the
  // (name, id) index, newest first.
  s.history_trim = {"history.trim", "DELETE FROM " + t.runs + " WHERE name = :name AND id <= (SELECT id FROM (SELECT id FROM " +
                                        t.runs + " WHERE name = :name ORDER BY id DESC LIMIT 1 OFFSET :keep) AS cutoff)"};

  // The header is taken for its own count, when idle (no slot row held: the names between
  // :first and :past are exactly its slot rows), or from a plain row nobody holds. The slot
  // rows are read through a derived table with LIMIT, which the server materializes: MySQL
  // refuses a subquery on the table an INSERT writes (ER_UPDATE_TABLE_USED). What the
  // condition reads (slots, strategy, then the plain row's times) is assigned last, and once
  // slots = :slots and strategy = 'semaphore' its first branch holds.
  const std::string header_free =
      "((strategy <=> 'semaphore' AND (slots <=> :slots OR NOT EXISTS (SELECT 1 FROM (SELECT 1 FROM " + t.locks +
      " s WHERE s.name > :first AND s.name < :past AND s.released_at IS NULL AND"
      " (s.strategy <> 'lease' OR s.expires_at > NOW(6)) LIMIT 1) AS held))) OR"
      " (NOT strategy <=> 'semaphore' AND (acquired_at IS NULL OR expires_at <= NOW(6) OR"
      " (expires_at IS NULL AND released_at IS NOT NULL))))";
  s.header_take = {"semaphore.header_take",
                   "INSERT INTO " + t.locks +
                       " (name, owner, host, pid, token, strategy, session_id, acquired_at, renewed_at, expires_at,"
                       " released_at, last_started_at, slots) VALUES (:key, :owner, :host, :pid, 1, 'semaphore', NULL,"
                       " NOW(6), NOW(6), '9999-12-31 23:59:59', NULL, NOW(6), :slots) ON DUPLICATE KEY UPDATE " +
                       assign_each_if(header_free, {{"owner", "VALUES(owner)"},
                                               {"host", "VALUES(host)"},
                                               {"pid", "VALUES(pid)"},
                                               {"session_id", "NULL"},
                                               {"renewed_at", "NOW(6)"},
                                               {"last_started_at", "NOW(6)"},
                                               {"token", "token + 1"},
                                               {"slots", "VALUES(slots)"},
                                               {"strategy", "'semaphore'"},
                                               {"acquired_at", "NOW(6)"},
                                               {"released_at", "NULL"},
                                               {"expires_at", "VALUES(expires_at)"}})};
  s.header_refusal = {"semaphore.header_refusal", "SELECT " + status + ", slots FROM " + t.locks + " WHERE name = :key"};
  s.lock_row = {"lock_row", "SELECT 1 FROM " + t.locks + " WHERE name = :key FOR UPDATE"};
  return s;
}

}  // namespace dblock::mysql

#include "core/sql/rules.hpp"

#include <iterator>

namespace dblock::sql {

std::string time_of_ms_sql(const Dialect& d, std::string_view ms) {
  return d.time_of_ms ? d.time_of_ms(ms) : d.plus_ms(d.epoch, ms);
}

std::string epoch_ms_sql(const Dialect& d, std::string_view expr) {
  return d.epoch_ms ? d.epoch_ms(expr) : "(" + d.ms_between(d.epoch, expr) + ")";
}

rows::EpochMs epoch_ms_of(const Dialect& d) {
  return [&d](std::string_view expr) { return epoch_ms_sql(d, expr); };
}

Assignments taken_row(const Dialect& d, Assignments rest) {
  Assignments out{{"name", ":key"}};
  for (const tables::Column& c : tables::locks_columns) {
    if (!c.holder) continue;
    const std::string param = ":" + std::string(c.name);
    if (c.type == tables::Type::int64 || c.type == tables::Type::int32)
      out.emplace_back(c.name, param);
    else if (c.type == tables::Type::timestamp)
      out.emplace_back(c.name, time_of_ms_sql(d, param));
    else
      out.emplace_back(c.name, param);
  }
  out.insert(out.end(), std::make_move_iterator(rest.begin()), std::make_move_iterator(rest.end()));
  return out;
}

Assignments taken_set(Assignments rest) {
  Assignments out;
  for (const tables::Column& c : tables::locks_columns)
    if (c.holder) out.emplace_back(c.name, "");
  out.insert(out.end(), std::make_move_iterator(rest.begin()), std::make_move_iterator(rest.end()));
  return out;
}

HistoryStatements history_statements(const Dialect& d, const std::string& runs) {
  HistoryStatements s;
  s.add = {"history.add", "INSERT INTO " + runs +
                              " (name, token, owner, host, pid, strategy, started_at, finished_at, outcome, exit_code)"
                              " VALUES (:name, :token, :owner, :host, :pid" +
                              ", :strategy, " + time_of_ms_sql(d, ":started_ms") + ", " + d.now + ", :outcome, :exit_code)"};
  s.oldest = {"history.oldest", "SELECT token FROM " + runs + " WHERE name = :name ORDER BY id LIMIT 1"};
  // The row at offset :keep (newest first) is the newest one to go; everything older goes too:
  // a seek of the (name, id) index from the newest end, as far as that row. The derived table
  // lets MySQL read the table it deletes from (ER_UPDATE_TABLE_USED).
  s.trim = {"history.trim", "DELETE FROM " + runs + " WHERE name = :name AND id <= (SELECT id FROM (SELECT id FROM " +
                                runs + " WHERE name = :name ORDER BY id DESC LIMIT 1 OFFSET :keep" +
                                ") AS cutoff)"};
  return s;
}

// :owner compared first, then asked IS NULL: a server that infers a parameter's type from its
// first use (PostgreSQL) finds it text there, where IS NULL alone says nothing.
std::string named_holder_sql(std::string_view row) {
  const std::string r(row);
  return "(" + r + "owner = :owner OR :owner IS NULL) AND (:token IS NULL OR " + r + "token = :token)";
}

namespace {

// Dialect::started_ms_ago, or ms_between the row's last start and `now`; "" where neither.
std::string started_ms_ago_sql(const Dialect& d, std::string_view row, std::string_view now) {
  if (d.started_ms_ago) return d.started_ms_ago(row, now);
  return d.ms_between ? d.ms_between(std::string(row) + "last_started_at", now) : std::string();
}

}  // namespace

// Whole milliseconds since the last start at least :min_interval_ms (an integer) is the same
// as the last start plus that many milliseconds not after `now`: the dialect's time arithmetic
// (Dialect::plus_ms, epoch_ms), unless it counts the milliseconds since the last start itself
// (Dialect::started_ms_ago: a clock of its own; ms_between: times finer than the millisecond).
std::string due_sql(const Dialect& d, std::string_view row, std::string_view now) {
  const std::string interval = ":min_interval_ms", last = std::string(row) + "last_started_at";
  const std::string ago = started_ms_ago_sql(d, row, now);
  const std::string passed = !ago.empty() ? ago + " >= " + interval : d.plus_ms(last, interval) + " <= " + std::string(now);
  return "(" + interval + " <= 0 OR " + last + " IS NULL OR " + passed + ")";
}

// Read only when --min-interval is given (refused()): no CASE for none; a row never started
// makes it NULL.
std::string due_in_ms_sql(const Dialect& d, std::string_view row) {
  const std::string interval = ":min_interval_ms", last = std::string(row) + "last_started_at";
  const std::string ago = started_ms_ago_sql(d, row, d.now);
  return !ago.empty() ? interval + " - " + ago : epoch_ms_sql(d, last) + " - " + epoch_ms_sql(d, d.now) + " + " + interval;
}

namespace {

std::string given_or(bool given, const std::string& numbered) {
  return given ? "COALESCE(:token, " + numbered + ")" : numbered;
}

}  // namespace

std::string first_token_sql(bool given, std::string_view fence) {
  return given_or(given, fence.empty() ? "1" : std::string(fence) + " + 1");
}

std::string next_token_sql(std::string_view row, bool given, std::string_view fence) {
  const std::string last = std::string(row) + "token";
  return given_or(given, fence.empty() ? last + " + 1" : "GREATEST(" + last + ", " + std::string(fence) + ") + 1");
}

std::string header_free_sql(const Dialect& d, std::string_view row, const std::string& locks) {
  const std::string r(row);
  const std::string slot_held = "EXISTS (SELECT 1 FROM (SELECT 1 FROM " + locks +
                                " s WHERE s.name > :first AND s.name < :past AND s.released_at IS NULL AND (s.strategy IS NULL"
                                " OR s.strategy <> 'lease' OR " + d.lease_live("s.", d.now) + ") LIMIT 1) AS held)";
  // Each AND under its OR parenthesized (as SQL reads it anyway), so the layout shows it.
  return "CASE WHEN " + r + "strategy = 'semaphore' THEN " + r + "slots = :slots" +
         " OR (:recount = 1 AND NOT " + slot_held + ") ELSE " + r + "acquired_at IS NULL OR (NOT " +
         d.lease_live(r, d.now) + " AND (" + r + "released_at IS NOT NULL OR " + r + "strategy = 'lease')) END";
}

std::string failover_delayed_sql(const Dialect& d, std::string_view r) {
  // The record's expires_at is the end of the lock-delay: in force while that "lease" runs.
  return d.lease_live(r, d.now);
}

std::string failover_covers_sql(std::string_view r) {
  return std::string(r) + "pid >= :ttl_ms";
}

std::string failover_open_conditions(const Dialect& d, std::string_view r, std::string_view here) {
  return (here.empty() ? std::string() : std::string(here) + " AND ") + "NOT " + failover_delayed_sql(d, r) + " AND " +
         failover_covers_sql(r);
}

std::string failover_open_sql(const Dialect& d, std::string_view r, std::string_view here) {
  return "(" + failover_open_conditions(d, r, here) + ")";
}

}  // namespace dblock::sql

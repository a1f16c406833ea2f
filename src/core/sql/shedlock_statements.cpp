// --table-format shedlock's statements (statements.hpp, ShedlockStatements), written once and
// rendered through the dialect's expressions (rules.hpp, Dialect), as ShedLock's JDBC provider
// writes its four statements once over a few time expressions per database: the lock is
// ShedLock's row, in ShedLock's time (Dialect::utc_now), and dblock's own row of the name
// carries the fencing token.

#include "core/sql/lock_rows.hpp"
#include "core/sql/rules.hpp"
#include "core/sql/shedlock.hpp"

namespace dblock::sql {

std::string more_assignments(const Assignments& set) {
  std::string out;
  for (const auto& [column, value] : set) out += ", " + column + " = " + value;
  return out;
}

std::string on_conflict_upsert(const Upsert& u) { return on_conflict_upsert(u, ""); }

std::string on_conflict_upsert(const Upsert& u, std::string_view from) {
  std::string columns, values, set;
  for (const auto& [column, value] : u.values) {
    columns += (columns.empty() ? "" : ", ") + column;
    values += (values.empty() ? "" : ", ") + value;
  }
  const std::string row = u.alias + ".";
  for (const auto& [column, value] : u.set(row))
    set += (set.empty() ? "" : ", ") + column + " = " + (value.empty() ? "EXCLUDED." + column : value);
  return "INSERT INTO " + u.table + (set.empty() ? "" : " AS " + u.alias) + " (" + columns + ")" +
         (from.empty() ? " VALUES (" + values + ")" : " SELECT " + values + std::string(from)) +
         " ON CONFLICT" + (u.key.empty() ? "" : " (" + u.key + ")") +
         (set.empty() ? " DO NOTHING" : " DO UPDATE SET " + set + " WHERE " + u.when(row));
}

std::string shedlock_holder_sql(const Dialect& d, const Tables& t, const std::string& shedlock) {
  return "SELECT s.name, s.locked_by, " + epoch_ms_sql(d, "s.locked_at") + ", " + epoch_ms_sql(d, "s.lock_until") + ", " +
         epoch_ms_sql(d, d.utc_now) + ", COALESCE(l.token, 0), CASE WHEN l.owner = s.locked_by THEN l.host END,"
         " CASE WHEN l.owner = s.locked_by THEN l.pid END FROM " + shedlock + " s LEFT JOIN " + t.locks +
         " l ON l.name = s.name";
}

ShedlockStatements shedlock_statements(const Dialect& d, const Tables& t, const std::string& shed) {
  const std::string token = ":token", ttl = ":ttl_ms";
  const std::string until = d.plus_ms(d.utc_now, ttl);
  // The holder's token still dblock's row's: no one has taken the name since (ShedLock's own
  // test is locked_by, which two hosts given one --owner share).
  const std::string still_token = "EXISTS (SELECT 1 FROM " + t.locks + " WHERE name = :key AND token = " + token + ")";
  // ShedLock knows only locked_by, so a token names the owner of dblock's row with that token.
  // :owner compared before IS NULL, as named_holder_sql does.
  const std::string named = "(locked_by = :owner OR :owner IS NULL) AND (" + token +
                            " IS NULL OR locked_by = (SELECT owner FROM " + t.locks + " WHERE name = :key AND token = " +
                            token + " AND strategy = 'shedlock'))";
  ShedlockStatements s;
  s.begin = d.begin;

  // ShedLock's insert, or its update where lock_until has passed, as one upsert: the row is
  // locked for writing at once (an insert that fails, then an update, would deadlock two takers
  // in one transaction). Where dblock keeps the holder's lease on a clock of its own too
  // (OwnLease), that lease decides before a wall clock that may have been stepped: no dblock
  // takes the name while it runs, and once its holder released it (its --min-hold over) it is
  // free even when lock_until looks ahead. A wall-clock step moves only what the Java side sees.
  const std::string own = d.own_lease.live("l.");
  s.take = {"shedlock.take",
            d.upsert({shed, "s",
                      {{"name", ":key"}, {"lock_until", until}, {"locked_at", d.utc_now}, {"locked_by", ":owner"}},
                      [](std::string_view) { return Assignments{{"locked_at", ""}, {"locked_by", ""}, {"lock_until", ""}}; },
                      [&](std::string_view row) {
                        const std::string expired = std::string(row) + "lock_until <= " + d.utc_now;
                        if (own.empty()) return expired;
                        const std::string dblocks = "SELECT 1 FROM " + t.locks + " l WHERE l.name = " + std::string(row) +
                                                    "name AND l.owner = " + std::string(row) +
                                                    "locked_by AND l.strategy = 'shedlock' AND l.released_at IS ";
                        return "(" + expired + " AND NOT EXISTS (" + dblocks + "NULL AND " + own + " = 1) OR EXISTS (" +
                               dblocks + "NOT NULL AND " + own + " = 0))";
                      }}) +
                d.returning(epoch_ms_sql(d, "lock_until"))};

  // dblock's row of the name: the holder, the next token, strategy 'shedlock', session_id the
  // ShedLock table, assigned in that order.
  const std::string first = first_token_sql(false, "");
  Assignments values = taken_row(d, {{"token", first},        {"strategy", "'shedlock'"},
                                      {"session_id", ":table"}, {"acquired_at", d.now},
                                      {"renewed_at", d.now},    {"expires_at", "NULL"},
                                      {"released_at", "NULL"},  {"last_started_at", d.now}});
  for (auto& own_column : d.own_lease.start(first, ttl)) values.push_back(std::move(own_column));
  s.number = {"shedlock.number",
              d.upsert({t.locks, "l", std::move(values),
                        [&](std::string_view row) {
                          const std::string next = next_token_sql(row, false, "");
                          Assignments set = taken_set({{"token", next},
                                                       {"session_id", ""},
                                                       {"renewed_at", d.now},
                                                       {"strategy", "'shedlock'"},
                                                       {"acquired_at", d.now},
                                                       {"expires_at", "NULL"},
                                                       {"released_at", "NULL"},
                                                       {"last_started_at", d.now}});
                          for (auto& own_column : d.own_lease.start(next, ttl)) set.push_back(std::move(own_column));
                          return set;
                        },
                        [&](std::string_view row) {
                          return rows::strategy_allows_sql(row, "'shedlock'", "NOT " + d.lease_live(row, d.now)) + " AND " +
                                 shedlock::same_table_sql(row);
                        }}) +
                  d.returning("token, " + epoch_ms_sql(d, "acquired_at"))};
  // Where `number` returns nothing. Its upsert meets the name's row through any unique key: a
  // second row of the name, in either table, fails the read (a subquery of more than one row),
  // which sends the run to the schema check.
  if (d.returning("token").empty())
    s.numbered = {"shedlock.numbered", "SELECT token, " + epoch_ms_sql(d, "acquired_at") + " FROM " + t.locks +
                                           " WHERE name = :key AND owner = :owner AND name = (SELECT name FROM " +
                                           t.locks + " WHERE name = :key) AND :key = (SELECT name FROM " + shed +
                                           " WHERE name = :key)"};
  s.holder = {"shedlock.holder", shedlock_holder_sql(d, t, shed) + " WHERE s.name = :key"};
  s.extend = {"shedlock.extend", "UPDATE " + shed + " SET lock_until = " + until +
                                     " WHERE name = :key AND locked_by = :owner AND lock_until > " + d.utc_now + " AND " +
                                     still_token};
  // The holder's own lease goes with its lock_until (`take`).
  if (const Assignments renew = d.own_lease.renew(ttl); !renew.empty())
    s.extend_own = {"shedlock.extend_own", "UPDATE " + t.locks + " SET renewed_at = " + d.now + more_assignments(renew) +
                                               " WHERE name = :key AND owner = :owner AND token = " + token +
                                               " AND released_at IS NULL AND " + d.own_lease.live("") + " IS NOT NULL"};
  // ShedLock's unlock with lockAtLeastFor: lock_until = the later of now and locked_at + it.
  const std::string at_least = d.plus_ms("locked_at", ":min_hold_ms");
  s.unlock = {"shedlock.unlock", "UPDATE " + shed + " SET lock_until = CASE WHEN " + at_least + " > " + d.utc_now +
                                     " THEN " + at_least + " ELSE " + d.utc_now + " END WHERE name = :key AND locked_by ="
                                     " :owner AND (" + token + " IS NULL OR " + still_token + ")"};
  const std::string finished = ":finished = 1";
  s.finish = {"shedlock.finish",
              "UPDATE " + t.locks + " SET released_at = " + d.now + ", last_finished_at = CASE WHEN " + finished +
                  " THEN " + d.now + " ELSE last_finished_at END, last_exit_code = CASE WHEN " + finished +
                  " THEN :exit_code ELSE last_exit_code END" +
                  more_assignments(d.own_lease.end(":min_hold_ms")) + " WHERE name = :key AND token = " + token +
                  " AND released_at IS NULL"};
  s.named_holder = {"shedlock.named_holder", "SELECT locked_by FROM " + shed + " WHERE name = :key AND (:force = 1 OR " + named + " AND lock_until > " +
                                                 d.utc_now + ")"};
  s.released = {"shedlock.released", "UPDATE " + t.locks + " SET released_at = " + d.now + more_assignments(d.own_lease.end("")) +
                                         " WHERE name = :key AND owner = :owner AND released_at IS NULL AND"
                                         " strategy = 'shedlock'"};
  return s;
}

}  // namespace dblock::sql

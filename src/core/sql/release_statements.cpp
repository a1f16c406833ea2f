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
                             d.lease_live("l.") + ") OR l.released_at IS NULL AND " + named_holder_sql(d, "l.") + ")";
  // A running lease ends now, truncated to the millisecond, never rounded up into the column's
  // precision: the key must read free right after.
  const std::string now_ms = d.time_of_ms(d.epoch_ms(d.now));
  const std::string release = "UPDATE " + t.locks + " AS l SET released_at = " + d.now + ", expires_at = CASE WHEN " +
                              d.lease_live("l.") + " THEN " + now_ms + " ELSE l.expires_at END" +
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

}  // namespace dblock::sql

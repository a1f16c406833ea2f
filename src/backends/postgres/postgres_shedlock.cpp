// --table-format shedlock on PostgreSQL (common/shedlock.hpp): the stateless `release` of its
// rows. The locker is common/shedlock_locker.cpp over shedlock_statements
// (postgres_statements.cpp), which take, extend and unlock the row as ShedLock's
// PostgresSqlServerTimeStatementsSource does: database time as timezone('utc', CURRENT_TIMESTAMP)
// in a TIMESTAMP without time zone.

#include <utility>

#include "backends/common/lock_rows.hpp"
#include "backends/postgres/postgres_tables.hpp"

namespace dblock::postgres {
namespace {

// ShedLock's "now": UTC wall time of the transaction, stored without a time zone.
constexpr std::string_view now_utc = "timezone('utc', CURRENT_TIMESTAMP)";

// The holder a stateless release names ($2 owner, $3 token): ShedLock knows only locked_by, so
// a token is dblock's row's owner of that token.
std::string named_holder(const Tables& t) {
  return "($2::text IS NULL OR locked_by = $2) AND ($3::bigint IS NULL OR locked_by = (SELECT owner FROM " + t.locks +
         " WHERE name = $1 AND token = $3::bigint AND strategy = 'shedlock'))";
}

Param selector_param(const std::optional<std::string>& v) { return v ? Param(*v) : Param(); }
Param selector_param(const std::optional<std::int64_t>& v) { return v ? Param(std::to_string(*v)) : Param(); }

}  // namespace

Result<void> shedlock_release(Connection& conn, const BackendOptions& options, const Tables& t,
                              const std::string& key, const HolderSelector& who) {
  if (!who.force && !who.owner && !who.token)
    return fail(ErrorKind::usage, "release needs the holder's owner or token, or --force");
  const std::string shed = quote_ident(options.shedlock_table);
  // ShedLock's unlock with lockAtLeastFor 0 (--force also cuts a lockAtLeastFor short), then
  // dblock's row of that holder is marked released.
  auto r = conn.exec("WITH u AS (UPDATE " + shed + " SET lock_until = " + std::string(now_utc) +
                         " WHERE name = $1 AND ($4::boolean OR " + named_holder(t) + " AND lock_until > " +
                         std::string(now_utc) + ") RETURNING locked_by), m AS (UPDATE " + t.locks +
                         " SET released_at = now() WHERE name = $1 AND released_at IS NULL AND strategy = 'shedlock' "
                         "AND owner IN (SELECT locked_by FROM u)) SELECT count(*) FROM u",
                     {key, selector_param(who.owner), selector_param(who.token), who.force ? "true" : "false"});
  if (!r) return std::unexpected(r.error());
  if (r->int64(0, 0) == 0 && !who.force)
    return fail(ErrorKind::lost, "'" + key + "' is not held by " + rows::describe(who));
  return {};
}

}  // namespace dblock::postgres

// --table-format shedlock on MariaDB/MySQL (common/shedlock.hpp): the stateless release of its
// rows. The locker and status are the common ones, on the
// statements of mysql_statements.cpp (ShedLock's MySqlServerTimeStatementsSource: database time
// as UTC_TIMESTAMP(3); this session is in UTC, so the TIMESTAMP(3) columns hold UTC as
// ShedLock's own sessions in UTC write it). ShedLock never reads dblock's tables.

#include <charconv>
#include <utility>

#include "backends/common/identifiers.hpp"
#include "backends/common/lock_rows.hpp"
#include "backends/mysql/mysql_error.hpp"
#include "backends/mysql/mysql_tables.hpp"

namespace dblock::mysql {
namespace {

// ShedLock's now (its MySqlServerTimeStatementsSource).
constexpr std::string_view now_utc = "UTC_TIMESTAMP(3)";

// The holder a stateless renew/release names: ShedLock knows only locked_by, so a token is
// dblock's row's owner of that token.
Sql named_holder(const Tables& t, const std::string& key, const HolderSelector& who) {
  return Sql("(? IS NULL OR locked_by = ?) AND (? IS NULL OR locked_by = (SELECT owner FROM " + t.locks +
                 " WHERE name = ? AND token = ? AND strategy = 'shedlock'))",
             who.owner, who.owner, who.token, key, who.token);
}

}  // namespace

Result<void> shedlock_release(Connection& conn, const BackendOptions& options, const Tables& t,
                              const std::string& key, const HolderSelector& who) {
  if (!who.force && !who.owner && !who.token)
    return fail(ErrorKind::usage, "release needs the holder's owner or token, or --force");
  const std::string shed = quote_identifier(options.shedlock_table, '`');
  Sql find("SELECT locked_by FROM " + shed + " WHERE name = ? AND (? OR ", key, who.force);
  find.add(named_holder(t, key, who)).add(" AND lock_until > " + std::string(now_utc) + ")");
  auto found = conn.execute(find);
  if (!found) return std::unexpected(found.error());
  if (found->rows.empty()) {
    if (who.force) return {};
    return fail(ErrorKind::lost, "'" + key + "' is not held by " + rows::describe(who));
  }
  const std::string holder = found->rows.front().at(0).value_or("");
  // ShedLock's unlock with lockAtLeastFor 0 (--force also cuts a lockAtLeastFor short), then
  // dblock's row of that holder is marked released.
  auto done = conn.execute("UPDATE " + shed + " SET lock_until = " + std::string(now_utc) +
                               " WHERE name = ? AND locked_by = ?",
                           {key, holder});
  if (!done) return std::unexpected(done.error());
  auto marked = conn.execute("UPDATE " + t.locks + " SET released_at = NOW(6) WHERE name = ? AND owner = ? AND "
                             "released_at IS NULL AND strategy = 'shedlock'",
                             {key, holder});
  if (!marked) return std::unexpected(marked.error());
  return {};
}

}  // namespace dblock::mysql

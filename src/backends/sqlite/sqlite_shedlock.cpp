// --table-format shedlock on SQLite (common/shedlock.hpp): the lease is a row of ShedLock's
// table, taken, extended and unlocked with the statements of ShedLock's JDBC provider in
// database time; dblock's own <prefix>locks row of the same name carries the fencing token
// (bumped in the same transaction) and <prefix>runs the history. ShedLock never reads them.
// Times are UTC text 'YYYY-MM-DD HH:MM:SS.SSS', so they compare as text; SQLite has no server
// clock, so unlike dblock's own lease this one is judged on the wall clock, as the Java side would.

#include <utility>

#include "backends/common/lock_rows.hpp"
#include "backends/sqlite/sqlite_tables.hpp"

namespace dblock::sqlite {
namespace {

/// Names of both tables, quoted.
struct ShedTables : Tables {
  explicit ShedTables(const BackendOptions& o) : Tables(o.table_prefix), shed(quote_ident(o.shedlock_table)) {}
  std::string shed;
};

/// SELECT of status and of a busy answer: name, locked_by, locked_at, lock_until, database now
/// (ms), the token and holder fields of dblock's row when it is this holder's.
std::string holder_select(const ShedTables& t) {
  return "SELECT s.name, s.locked_by, " + epoch_ms_sql("s.locked_at") + ", " + epoch_ms_sql("s.lock_until") + ", " +
         now_ms_sql() + ", COALESCE(l.token, 0), CASE WHEN l.owner = s.locked_by THEN l.host END, CASE WHEN l.owner = "
         "s.locked_by THEN l.pid END FROM " + t.shed + " s LEFT JOIN " + t.locks + " l ON l.name = s.name";
}

}  // namespace

std::string shedlock_status_select(const BackendOptions& options) {
  return "SELECT * FROM (" + holder_select(ShedTables(options)) + ")";
}

namespace {

// The holder a stateless renew/release names (?2 owner, ?3 token): ShedLock knows only
// locked_by, so a token is dblock's row's owner of that token.
std::string named_holder(const ShedTables& t) {
  return "(?2 IS NULL OR locked_by = ?2) AND (?3 IS NULL OR locked_by = (SELECT owner FROM " + t.locks +
         " WHERE name = ?1 AND token = ?3 AND strategy = 'shedlock'))";
}

}  // namespace

Result<void> shedlock_release(const Connection& conn, const BackendOptions& options, const std::string& key,
                              const HolderSelector& who) {
  if (!who.force && !who.owner && !who.token)
    return fail(ErrorKind::usage, "release needs the holder's owner or token, or --force");
  const ShedTables t(options);
  auto tx = Transaction::begin_immediate(conn, "releasing " + key);
  if (!tx) return std::unexpected(tx.error());
  // ShedLock's unlock with lockAtLeastFor 0 (--force also cuts a lockAtLeastFor short), then
  // dblock's row of that holder is marked released.
  auto unlock = conn.prepare("UPDATE " + t.shed + " SET lock_until = " + now_sql() + " WHERE name = ?1 AND (?4 OR " +
                             named_holder(t) + " AND lock_until > " + now_sql() + ") RETURNING locked_by");
  if (!unlock) return std::unexpected(unlock.error());
  unlock->bind(1, std::string_view(key));
  unlock->bind(2, who.owner);
  unlock->bind(3, who.token);
  unlock->bind(4, static_cast<std::int64_t>(who.force ? 1 : 0));
  auto row = unlock->step("releasing " + key);
  if (!row) return std::unexpected(row.error());
  if (!*row) {
    if (who.force) return {};
    return fail(ErrorKind::lost, "the lock " + key + " is not held by " + rows::describe(who));
  }
  const std::string holder = unlock->text(0);
  if (auto done = unlock->run("releasing " + key); !done) return done;
  auto mark = conn.prepare("UPDATE " + t.locks + " SET released_at = " + now_sql() +
                           " WHERE name = ?1 AND owner = ?2 AND released_at IS NULL AND strategy = 'shedlock'");
  if (!mark) return std::unexpected(mark.error());
  mark->bind(1, std::string_view(key));
  mark->bind(2, std::string_view(holder));
  if (auto done = mark->run("releasing " + key); !done) return done;
  return tx->commit("committing the release of " + key);
}

}  // namespace dblock::sqlite

// What status, history, `dblock renew` and doctor read (statements.hpp, InspectStatements),
// written once and rendered through the dialect's expressions (rules.hpp, Dialect).

#include "core/sql/lock_rows.hpp"
#include "core/sql/rules.hpp"
#include "core/sql/tables.hpp"

namespace dblock::sql {
namespace {

// Over dblock's tables `t` (t.locks and t.runs may be derived tables that read an older
// dblock's as this version's) or, with --table-format shedlock, ShedLock's table `shedlock`
// (quoted; "" without).
InspectStatements inspect_over(const Dialect& d, const Tables& t, const std::string& shedlock) {
  const std::string token = ":token";
  const std::string named = named_holder_sql("");
  const std::string keys = d.json_texts(":keys");
  InspectStatements s;
  if (shedlock.empty()) {
    // dblock's rows, then live and the server's verdict on a session strategy's holder: a
    // crashed session holder shows free.
    const std::string rows_of = "SELECT " + rows::status_select_list(epoch_ms_of(d), d.now) + ", CASE WHEN " +
                                d.lease_live("l.", d.now) + " THEN 1 ELSE 0 END, " + d.session_holds("l.", t) + " FROM " +
                                t.locks + " l";
    s.status_all = {"inspect.status_all", rows_of + " ORDER BY l.name"};
    s.status_keys = {"inspect.status_keys", rows_of + " WHERE l.name IN " + keys + " ORDER BY l.name"};
  } else {
    const std::string rows_of = shedlock_holder_sql(d, t, shedlock);
    s.status_all = {"inspect.status_all", rows_of + " ORDER BY s.name"};
    s.status_keys = {"inspect.status_keys", rows_of + " WHERE s.name IN " + keys + " ORDER BY s.name"};
  }
  // An alias: t.runs may be a derived table (InspectStatements::older).
  const std::string history = "SELECT " + rows::history_select_list(epoch_ms_of(d)) + " FROM " + t.runs + " h";
  const std::string newest = " ORDER BY id DESC LIMIT :limit";
  s.history_all = {"inspect.history_all", history + newest};
  s.history_of = {"inspect.history_of", history + " WHERE name = :name" + newest};
  s.now_ms = {"inspect.now_ms", "SELECT " + epoch_ms_sql(d, d.now)};
  s.slot_count = {"inspect.slot_count", "SELECT slots FROM " + t.locks + " WHERE name = :key AND strategy = 'semaphore'"};
  const std::string ttl = ":ttl_ms";
  if (shedlock.empty()) {
    s.renew_named = {"inspect.renew_named", "UPDATE " + t.locks + " SET renewed_at = " + d.now + ", expires_at = " +
                                                d.plus_ms(d.now, ttl) + more_assignments(d.own_lease.renew(ttl)) + " WHERE name = :key AND released_at IS NULL"
                                                " AND " + named + " AND strategy = 'lease'" +
                                                d.returning(epoch_ms_sql(d, "expires_at"))};
    if (d.returning("expires_at").empty())
      s.renewed = {"inspect.renewed", "SELECT " + epoch_ms_sql(d, "expires_at") + " FROM " + t.locks +
                                          " WHERE name = :key AND released_at IS NULL AND " + named};
    return s;
  }
  // ShedLock knows only locked_by, so a token names the owner of dblock's row with that token;
  // :owner compared before IS NULL, as named_holder_sql does.
  s.renew_named = {"inspect.renew_named",
                   "UPDATE " + shedlock + " SET lock_until = " + d.plus_ms(d.utc_now, ttl) +
                       " WHERE name = :key AND (locked_by = :owner OR :owner IS NULL) AND (" + token +
                       " IS NULL OR locked_by = (SELECT owner FROM " + t.locks + " WHERE name = :key AND token = " +
                       token + " AND strategy = 'shedlock')) AND lock_until > " + d.utc_now +
                       d.returning(epoch_ms_sql(d, "lock_until"))};
  if (d.returning("lock_until").empty())
    s.renewed = {"inspect.renewed", "SELECT " + epoch_ms_sql(d, "lock_until") + " FROM " + shedlock + " WHERE name = :key"};
  // The ShedLock holder's own lease goes with its lock_until (shedlock_statements, `take`).
  if (const std::string own = more_assignments(d.own_lease.renew(ttl)); !own.empty())
    s.renew_own = {"inspect.renew_own", "UPDATE " + t.locks + " SET renewed_at = " + d.now + own +
                                            " WHERE name = :key AND strategy = 'shedlock' AND released_at IS NULL AND"
                                            " owner = (SELECT locked_by FROM " + shedlock + " WHERE name = :key) AND " +
                                            named + " AND " + d.own_lease.live("") + " IS NOT NULL"};
  return s;
}

}  // namespace

InspectStatements inspect_statements(const Dialect& d, const tables::SchemaDialect& sd, const BackendOptions& options) {
  const Tables t(options.table_prefix, sd.quote);
  if (options.shedlock) return inspect_over(d, t, quote_identifier(options.shedlock_table, sd.quote));
  InspectStatements s = inspect_over(d, t, "");
  // Each older shape reads what it has and NULL for what it lacks, and writes nothing (a
  // derived table takes no UPDATE); built oldest first, as each is the `older` of the next.
  const std::vector<tables::OlderShape> shapes = tables::older_shapes(sd);
  for (auto shape = shapes.rbegin(); shape != shapes.rend(); ++shape) {
    Tables read = t;
    read.locks = tables::read_as_before(tables::locks, sd, t.locks, shape->before);
    read.runs = tables::read_as_before(tables::runs, sd, t.runs, shape->before);
    InspectStatements older = inspect_over(d, read, "");
    older.slot_count = older.renew_named = older.renewed = older.renew_own = {};
    for (const auto& [table, column] : shape->lacks) older.lacks.emplace_back(options.table_prefix + table, column);
    older.older = std::move(s.older);
    s.older = std::make_shared<const InspectStatements>(std::move(older));
  }
  return s;
}

}  // namespace dblock::sql

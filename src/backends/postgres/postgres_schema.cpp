#include <memory>

#include "backends/common/schema.hpp"
#include "backends/postgres/postgres_tables.hpp"
#include "core/semaphore.hpp"

namespace dblock::postgres {

Tables tables_for(const std::string& prefix) {
  return Tables{prefix, quote_ident(prefix + "locks"), quote_ident(prefix + "runs"), quote_ident(prefix + "claims")};
}

Result<void> ensure_schema(Connection& conn, const Tables& t) {
  // A session on the caller's connection, which outlives it (the aliasing shared_ptr owns nothing).
  Session session(std::shared_ptr<Connection>(std::shared_ptr<Connection>(), &conn), t.prefix);
  BackendOptions options;
  options.table_prefix = t.prefix;
  session.set_schema(std::make_shared<const sql::SchemaStatements>(schema_statements(options)));
  return sql::ensure_schema(session);
}

std::string session_verdict(const Tables& t, std::string_view row) {
  // Never the pid alone: the server reuses it, and any session may hold some lock on the
  // claims table. advisory and txn-insert: the advisory locks the session holds in the form
  // the strategy takes its key's in (one bigint: objsubid 1; two ints: objsubid 2), as
  // classid:objid, which session_holds_sql compares with the key's. for-update: the session runs
  // the transaction whose id is in the key's claims row's xmax (the row lock's locker) and
  // which is still open.
  const std::string r(row), pid = r + ".session_id::int";
  const std::string advisory_locks =
      "(SELECT string_agg(k.classid::text || ':' || k.objid::text, ',') FROM pg_locks k WHERE k.locktype = 'advisory' "
      "AND k.granted AND k.pid = " + pid + " AND k.objsubid = ";
  return "CASE WHEN " + r + ".session_id IS NULL OR " + r + ".session_id !~ '^[0-9]{1,9}$' THEN NULL "
         "WHEN " + r + ".strategy = 'advisory' THEN " + advisory_locks + "1) "
         "WHEN " + r + ".strategy = 'txn-insert' THEN " + advisory_locks + "2) "
         "WHEN " + r + ".strategy = 'for-update' THEN (SELECT 'xact' FROM " + t.claims + " c JOIN pg_locks k "
         "  ON k.locktype = 'transactionid' AND k.transactionid = c.xmax WHERE c.name = " + r + ".name "
         "  AND c.kind = 'for-update' AND k.granted AND k.pid = " + pid + " LIMIT 1) END";
}

std::string session_holds_sql(std::string_view strategy, std::string_view verdict, std::string_view hi,
                              std::string_view lo) {
  const std::string v(verdict);
  return "CASE WHEN " + std::string(strategy) + " = 'for-update' THEN " + v + " = 'xact' ELSE position(',' || " +
         std::string(hi) + "::text || ':' || " + std::string(lo) + "::text || ',' IN ',' || " + v + " || ',') > 0 END";
}

}  // namespace dblock::postgres

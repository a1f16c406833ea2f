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

RunRecord complete_run(RunRecord run, const LockRequest& req, std::int64_t token, Strategy s, bool still_held) {
  return complete_run_record(std::move(run), HeldLock{req.key, req.owner, req.host, req.pid, token}, to_string(s),
                             still_held);
}

std::string semaphore_header_ctes(const Tables& t, std::string_view slot_free, int first) {
  auto n = [first](int i) { return "$" + std::to_string(first + i); };
  // Far in the future, not 'infinity': a plain lease finds the header held, and its time still
  // converts to epoch milliseconds. The count changes only while no slot is held: a lease slot
  // whose lease is live, or a session slot not released (a crashed session's slot counts until
  // it is taken and released again, as its server lock cannot be asked about from here).
  return "f AS (SELECT " + std::string(slot_free) + " AS free), "
         "h AS (INSERT INTO " + t.locks + " AS l (name, owner, host, pid, token, strategy, session_id, acquired_at, "
         "renewed_at, expires_at, released_at, last_started_at, slots) "
         "SELECT " + n(0) + "::text, $2, $3, $4::bigint, 1, 'semaphore', NULL, now(), now(), "
         "timestamptz '9999-12-31 00:00:00+00', NULL, now(), " + n(1) + "::int FROM f WHERE f.free "
         "ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, host = EXCLUDED.host, pid = EXCLUDED.pid, "
         "token = l.token + 1, strategy = 'semaphore', session_id = NULL, acquired_at = now(), renewed_at = now(), "
         "expires_at = EXCLUDED.expires_at, released_at = NULL, last_started_at = now(), slots = EXCLUDED.slots "
         "WHERE CASE WHEN l.slots IS NULL THEN l.released_at IS NOT NULL OR l.acquired_at IS NULL "
         "OR (l.strategy = 'lease' AND l.expires_at <= now()) "
         "ELSE l.slots = EXCLUDED.slots OR NOT EXISTS (SELECT 1 FROM " + t.locks + " s WHERE s.name > " + n(2) +
         "::text AND s.name < " + n(3) + "::text AND s.released_at IS NULL "
         "AND (s.strategy IS DISTINCT FROM 'lease' OR s.expires_at > now())) END "
         "RETURNING token), ";
}

void append_semaphore_params(Params& p, const LockRequest& req) {
  p.insert(p.end(), {req.semaphore, std::to_string(req.slots), req.semaphore + slot_separator,
                     req.semaphore + char(slot_separator + 1)});
}

std::string semaphore_refuser(int first) { return "CASE WHEN f.free THEN $" + std::to_string(first) + " ELSE $1 END"; }

std::string release_tail(const Tables& t, std::string_view final_columns, int first) {
  // $1 key and $2 token; the history's own parameters from `first` on. The history row's name
  // is the key's: a semaphore slot's runs are its semaphore's history.
  auto n = [first](int i) { return "$" + std::to_string(first + i); };
  // The DELETE sees the snapshot before the INSERT, so it keeps keep-1 older rows; it seeks the
  // (name, id) index from the newest end, as far as the keep-th row.
  return ", h AS (INSERT INTO " + t.runs +
         " (name, token, owner, host, pid, strategy, started_at, finished_at, outcome, exit_code) "
         "SELECT " + n(8) + "::text, $2::bigint, " + n(1) + ", " + n(2) + ", " + n(3) + "::bigint, " + n(7) + ", "
         "COALESCE((SELECT acquired_at FROM " + t.locks + " WHERE name = $1 AND token = $2::bigint), statement_timestamp()), "
         "statement_timestamp(), "
         "CASE WHEN EXISTS (SELECT 1 FROM u) THEN " + n(4) + " ELSE 'lost' END, " + n(5) + "::int WHERE " + n(0) +
         "::boolean RETURNING id), "
         "d AS (DELETE FROM " + t.runs + " WHERE " + n(0) + "::boolean AND name = " + n(8) + " AND id <= (SELECT id FROM " + t.runs +
         " WHERE name = " + n(8) + " ORDER BY id DESC OFFSET " + n(6) + "::bigint - 1 LIMIT 1)) "
         "SELECT c.n, set_config('synchronous_commit', 'off', true)" +
         (final_columns.empty() ? std::string() : ", " + std::string(final_columns)) +
         " FROM (SELECT count(*) AS n FROM u) c";
}

void append_history_params(Params& p, const ReleaseRequest& req, const LockRequest& held, std::int64_t token, Strategy s,
                           int keep) {
  if (!req.history) {
    p.insert(p.end(), {"false", Param(), Param(), Param(), Param(), Param(), Param(), std::string(to_string(s)),
                       std::string(key_of_row(held.key))});
    return;
  }
  // still_held: the statement itself says 'lost' when the release found the lock gone.
  RunRecord run = complete_run(*req.history, held, token, s, true);
  p.insert(p.end(), {"true", run.owner, run.host, std::to_string(run.pid), std::string(to_string(run.outcome)),
                     run.exit_code ? Param(std::to_string(*run.exit_code)) : Param(), std::to_string(std::max(1, keep)),
                     run.strategy, run.key});
}

void append_sample_history_params(Params& p, const LockRequest& held, Strategy s, int keep) {
  p.insert(p.end(), {"true", held.owner, held.host, std::to_string(held.pid), std::string(to_string(RunOutcome::ok)), "0",
                     std::to_string(std::max(1, keep)), std::string(to_string(s)), std::string(key_of_row(held.key))});
}

}  // namespace dblock::postgres

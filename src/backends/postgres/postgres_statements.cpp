// The PostgreSQL dialect's statements for the strategies of core/sql (statements.hpp
// has each one's contract). "Now" is the server's now(), the transaction's start; the parameters
// core binds as integers arrive as int8 (the connection declares them: sql::integer_parameter),
// the others untyped, so a number of those is cast where it is used (unless the only function
// that takes it says its type: the transaction-level advisory locks' two ints, txn-insert's
// queue).

#include "backends/postgres/postgres_descriptor.hpp"
#include "backends/postgres/postgres_tables.hpp"
#include "core/sql/lock_rows.hpp"
#include "core/sql/rules.hpp"

namespace dblock::postgres {
namespace {

// A timestamptz expression as epoch milliseconds (bigint).
std::string ms(std::string_view expr) { return "floor(extract(epoch FROM " + std::string(expr) + ") * 1000)::bigint"; }

// ShedLock's "now" (PostgresSqlServerTimeStatementsSource): UTC wall time of the transaction,
// stored in a TIMESTAMP without time zone, which extract(epoch) reads as UTC.
const std::string now_utc = "timezone('utc', CURRENT_TIMESTAMP)";

/// key_hash(prefix, name) (identifiers.cpp: FNV-1a 64 over prefix, a NUL byte and the name) in
/// SQL, as numeric 0 .. 2^64 - 1, the name given as the SQL expression `name`. The state after
/// the prefix and its NUL is key_hash(prefix, ""); the name's UTF-8 bytes (v) are folded in by a
/// recursive query (xor touches the low byte only, so it is done on that byte). A query of one
/// row and one column, h, for a scalar subquery.
std::string key_hash_sql(const std::string& prefix, std::string_view name) {
  const auto h = static_cast<std::uint64_t>(key_hash(prefix, ""));
  return "WITH RECURSIVE f(i, h, v) AS (SELECT 0, " + std::to_string(h) + "::numeric, convert_to(" + std::string(name) +
         ", 'UTF8') UNION ALL SELECT i + 1, mod((h - mod(h, 256) + (mod(h, 256)::int # get_byte(v, i)))"
         " * 1099511628211, 18446744073709551616), v FROM f WHERE i < length(v)) SELECT h FROM f ORDER BY i DESC LIMIT 1";
}

/// SQL, over the <prefix>locks row `row` (an alias and its dot): whether the server shows the row's session_id
/// (a backend pid) holding the row's key's lock, as status and `release --force` judge it; never
/// the pid alone, which the server hands out again. for-update: the transaction whose id is the
/// key's claims row's xmax; advisory and txn-insert: the key's advisory lock in the strategy's
/// form (one bigint: objsubid 1; two ints: objsubid 2), its 64 bits the key's hash; no other
/// strategy records a session.
std::string session_holds(const Tables& t, std::string_view row) {
  const std::string r(row), pid = r + "session_id::int";
  return "CASE WHEN " + r + "session_id ~ '^[0-9]{1,9}$' IS NOT TRUE THEN false"
         " WHEN " + r + "strategy = 'for-update' THEN EXISTS (SELECT 1 FROM " + t.claims + " c JOIN pg_locks k"
         " ON k.locktype = 'transactionid' AND k.transactionid = c.xmax WHERE c.name = " + r + "name"
         " AND c.kind = 'for-update' AND k.granted AND k.pid = " + pid + ")"
         " ELSE EXISTS (SELECT 1 FROM pg_locks k WHERE k.locktype = 'advisory' AND k.granted AND k.pid = " + pid +
         " AND (k.objsubid, " + r + "strategy) IN ((1, 'advisory'), (2, 'txn-insert'))"
         " AND k.classid::bigint * 4294967296::numeric + k.objid::bigint = (" + key_hash_sql(t.prefix, r + "name") + ")) END";
}

std::string take(const sql::Take& k);

// The server's incarnation (failover.hpp): its system identifier, which a restore into another
// cluster changes, and its timeline, which each promotion advances. The timeline is that of the
// WAL being written: pg_control_checkpoint() lags until the first checkpoint after a promotion.
const std::string incarnation =
    "((SELECT system_identifier FROM pg_control_system())::text || '/timeline ' ||"
    " substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))";

// What core's rules (core/sql/rules.hpp) need spelled in PostgreSQL.
const sql::Dialect dialect{
    .now = "now()",
    .clock = "clock_timestamp()",
    // READ COMMITTED whatever the role's default: a statement after a lock (a semaphore's slot
    // rows after its header) must read what committed meanwhile.
    .begin = "BEGIN ISOLATION LEVEL READ COMMITTED",
    .utc_now = now_utc,
    .epoch_ms = &ms,
    .plus_ms = [](std::string_view time, std::string_view ms) { return std::string(time) + " + " + std::string(ms) + " * interval '1 ms'"; },
    .json_texts = [](std::string_view param) { return "(SELECT jsonb_array_elements_text(" + std::string(param) + "::jsonb))"; },
    .session_holds = [](std::string_view row, const Tables& t) { return "(" + session_holds(t, row) + ")::int"; },
    // The holder's session ended in the release itself, while the server shows it holding this
    // key's lock (never a reused backend pid, nor another key's holder; a lease's row shows none),
    // and the key's waiters told. pg_terminate_backend only signals (waiting needs 14+):
    // session_gone waits; of no pid (NULL) it is not called.
    .ended_session =
        [](std::string_view rows, const Tables& t) {
          return "SELECT h.pid, NULL, pg_notify(:channel, h.name)::text, pg_terminate_backend(h.pid) FROM (SELECT l.name,"
                 " CASE WHEN " + session_holds(t, "l.") + " THEN l.session_id::int END AS pid FROM " + std::string(rows) +
                 ") h";
        },
    .own_lease = {},  // none: the server's clock judges every lease
    // Advisory locks on the key's hash (:lock, key_hash), held by the session. A wait is bounded
    // by the transaction's lock_timeout, set ahead of it; the lock is wrapped in a subquery so
    // that the set_config before it, in the FROM, is evaluated first (a subquery with a volatile
    // function is not folded into the query). The locks are re-entrant and count their holds.
    .session_lock = {
        .lock =
            [](std::string_view key, bool wait) {
              return wait ? "(SELECT true FROM (SELECT pg_advisory_lock(" + std::string(key) + ")) w)"
                          : "pg_try_advisory_lock(" + std::string(key) + ")";
            },
        .bound = "set_config('lock_timeout', :lock_timeout, true)",
        .unlock = [](std::string_view key) { return "pg_advisory_unlock(" + std::string(key) + ")"; },
        .unlock_all = "pg_advisory_unlock_all()",
        // The transaction-level advisory locks: txn-insert's queue in the two-int form (another
        // lock tag than the advisory strategy's one-bigint locks, which status and release
        // --force tell apart by objsubid), the schema's turns in the one-bigint form.
        .transaction_lock =
            [](std::string_view key, bool wait) {
              return wait ? "(SELECT true FROM (SELECT pg_advisory_xact_lock(" + std::string(key) + ")) q)"
                          : "pg_try_advisory_xact_lock(" + std::string(key) + ")";
            },
    },
    .take = &take,
    // The key's waiters are told once the release commits, and that commit skips the disk wait
    // (unsynced_commit): only the acquisition must survive a crash (begin_release). The release
    // runs alone, outside begin_release (a session holder's, and a lease's ahead of its history
    // row), or with its history row in one statement (release_recorded).
    .release_returns = "pg_notify(:channel, name)",
    // Only the acquisition must survive a crash: a release lost in one leaves a lease to expire,
    // and the next acquirer's synchronous commit flushes the WAL up to its own token first (also
    // a release's own transaction, begin_unsynced: core's, `begin` and this).
    .unsynced_commit = "set_config('synchronous_commit', 'off', true)",
    .incarnation = incarnation,
    .session_id = "pg_backend_pid()",
    .serving = {},  // no Galera
};

// How PostgreSQL spells dblock's tables (core/sql/tables.hpp). name is COLLATE "C", so keys
// compare byte-wise, its length checked; timestamps keep milliseconds, in UTC.
const sql::tables::SchemaDialect schema_dialect{
    .type =
        [](sql::tables::Type t) -> std::string {
          using sql::tables::Type;
          switch (t) {
            case Type::name: return "text COLLATE \"C\"";
            case Type::text: return "varchar(255)";
            case Type::word: return "varchar(16)";
            case Type::session: return "varchar(64)";
            case Type::int64: return "bigint";
            case Type::int32: return "integer";
            case Type::timestamp: return "timestamptz(3)";
            case Type::id: break;
          }
          return "bigint";
        },
    .name_check =
        [](std::string_view column) {
          return "CHECK (octet_length(" + std::string(column) + ") BETWEEN 1 AND 255)";
        },
    .add_column = "ADD COLUMN IF NOT EXISTS",
};

// Dialect::take. The row is taken by an UPDATE of the row it locks with SKIP LOCKED, and made by
// an INSERT only when there is none. The waiters a release wakes find the row locked by the one
// that got there first and are refused at once: none waits for its commit, none locks the row
// after it (INSERT ... ON CONFLICT DO UPDATE locks it whether its WHERE holds or not, so the
// losers took the lock one after another, each with a commit, and the holder's release waited
// behind them all). A live lease, as the snapshot sees it, is refused unlocked. Not taken, the
// take says why (`refusal`, in its snapshot): a waiter pays one statement.
// The failover gate (failover.hpp) is read here: `g` has the fence when the record (`f`) names
// this server (`here`) and nothing else stands in the way (`clear`: no lock-delay in force, the
// TTL covered), and no row otherwise, when nothing is taken; the
// last column says when the record names another server (a failover, which a refusal by a live
// holder must not hide). Only read, the record costs a take one index lookup and no lock.
// The row taken, `h` takes the holder's handoff lock :hand for the run (NULL: none, as
// pg_try_advisory_lock is strict: NULL, nothing taken), only where the server process is the
// session's own, :backend (never behind a pooler): the lease waiter's one-round-trip handoff
// (postgres_connection.cpp, ListenWake); the last column counts it (1: the session is served
// directly, ListenWake::took). The taken row (`t`, the one `u` or `i` returned) comes first,
// its times converted as Take::returning converts them; the refused row (`r`, the key's) is
// joined only when nothing was taken, its columns those of Take::refused.
// A take that says nothing of a row it left alone (session.take, under the server lock) is
// core's form: its rows are not contended, and core reads the gate apart.
std::string take(const sql::Take& k) {
  if (!k.refused) return k.standard;
  const sql::Upsert up = k.upsert("g.fence");
  const std::string kept = "token, acquired_at, expires_at";
  std::string columns, values, set;
  for (const auto& [column, value] : up.values) {
    columns += (columns.empty() ? "" : ", ") + column;
    values += (values.empty() ? "" : ", ") + value;
  }
  for (const auto& [column, value] : up.set("l.")) {
    std::string v = value;
    for (const auto& [c, inserted] : up.values)
      if (v.empty() && c == column) v = inserted;
    set += (set.empty() ? "" : ", ") + column + " = " + v;
  }
  return "WITH f AS (SELECT " + sql::failover_open_sql(dialect, "", "") + " AS clear, token, owner = " + incarnation +
         " AS here FROM " + up.table +
         " WHERE name = :record), g AS (SELECT token AS fence FROM f WHERE here AND clear), u AS (UPDATE " + up.table +
         " AS l SET " + set +
         " FROM g WHERE l.name = (SELECT name FROM " + up.table + " WHERE name = :key AND " + up.when("") +
         " FOR UPDATE SKIP LOCKED) RETURNING " + kept + "), i AS (INSERT INTO " + up.table + " (" + columns +
         ") SELECT " + values + " FROM g WHERE NOT EXISTS (SELECT 1 FROM " + up.table +
         " WHERE name = :key) ON CONFLICT (name) DO NOTHING RETURNING " + kept +
         "), t AS (SELECT * FROM u UNION ALL SELECT * FROM i), h AS (SELECT pg_try_advisory_lock(:hand) FROM t"
         " WHERE pg_backend_pid() = :backend::int)"
         " SELECT t.token, " + ms("t.acquired_at") + ", " + ms("t.expires_at") + ", " + k.refused("r.") +
         ", (SELECT count(*) FROM f WHERE NOT here), hand.n FROM (SELECT count(*)"
         " AS n FROM h) hand LEFT JOIN t ON true LEFT JOIN " + up.table + " r ON t.token IS NULL AND r.name = :key";
}

}  // namespace

sql::LeaseStatements lease_statements(const std::string& prefix) { return sql::lease_statements(dialect, Tables(prefix, '"')); }

// All core's: for-update's lock (lock.claim), txn-insert's claim queued on the key's
// transaction-level advisory lock (SessionLock::transaction_lock), and the release with its
// history row in the holder's transaction (row_release_ended), at the moment it runs
// (clock_timestamp()).
sql::LockStatements lock_statements(const std::string& prefix) {
  return sql::lock_statements(dialect, Tables(prefix, '"'), {});
}

sql::QueueStatements queue_statements() { return sql::queue_statements(dialect, ":lock"); }

sql::ShedlockStatements shedlock_statements(const BackendOptions& options) {
  return sql::shedlock_statements(dialect, Tables(options.table_prefix, '"'), quote_identifier(options.shedlock_table, '"'));
}

sql::InspectStatements inspect_statements(const BackendOptions& options) {
  return sql::inspect_statements(dialect, schema_dialect, options);
}

sql::ReleaseStatements release_statements(const std::string& prefix) {
  return sql::release_statements(dialect, Tables(prefix, '"'));
}

sql::Statement session_id_statement() { return sql::session_id_statement(dialect); }

sql::DoctorStatements doctor_statements(const BackendOptions& options) {
  sql::DoctorStatements s = sql::doctor_statements(dialect, schema_dialect, options);
  // The idle limits in force: 'client' means the value came in this connection's startup packet,
  // so dblock's own did. A pooler that drops `options` (PgBouncer with it in
  // ignore_startup_parameters) leaves the server's limits on dblock's sessions.
  const std::string setting = "(SELECT setting || COALESCE(unit, '') FROM pg_settings WHERE name = ";
  s.checks = {
      // release --force of a session holder ends its backend: pg_terminate_backend is allowed on
      // a role's own sessions (and those of roles it is a member of); pg_signal_backend, any
      // non-superuser's.
      {"terminate",
       "SELECT 'terminate', 1, CASE WHEN r.rolsuper OR pg_has_role('pg_signal_backend', 'MEMBER') THEN 'role ' ||"
       " current_user || ' may end any role''s session: release --force ends every holder''s session' ELSE 'role ' ||"
       " current_user || ' may end only its own sessions (and its member roles''): release --force of a session"
       " holder works when every host uses this role; pg_signal_backend lets it end any role''s' END"
       " FROM pg_roles r WHERE r.rolname = current_user AND :session::int = 1"},
      {"idle_timeouts",
       "SELECT 'idle_timeouts', 1, CASE WHEN v.client THEN 'dblock''s own idle limits arrive with every connection"
       " (startup options; this session''s: ' || v.in_effect || '): a run''s own session (the lock holder''s) 2 x TTL +"
       " 5 s (its renewals keep it busy; a holder cut off from the server loses the lock after that), its other"
       " sessions 0 (none)' ELSE 'dblock''s own idle limits did not arrive: something between dblock and the server"
       " dropped the startup options (PgBouncer does when ignore_startup_parameters lists options), so the server''s"
       " apply to dblock''s sessions: ' || v.in_effect || CASE WHEN v.limited THEN '; a holder session idle longer"
       " than that between two renewals (every TTL/3) is ended and its lock lost: keep TTL/3 below it' ELSE '; none,"
       " so a holder cut off from the pooler keeps its lock until the pooler ends its server session' END END"
       " FROM (SELECT 'idle_session_timeout=' || COALESCE(" + setting + "'idle_session_timeout'), 'n/a') ||"
       " ', idle_in_transaction_session_timeout=' || " + setting + "'idle_in_transaction_session_timeout') AS in_effect,"
       " (SELECT source FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout') = 'client' AS client,"
       " (SELECT sum(setting::bigint) FROM pg_settings WHERE name IN ('idle_session_timeout',"
       " 'idle_in_transaction_session_timeout')) > 0 AS limited) v"},
      // What a failover can lose: with asynchronous standbys, the last grants (the failover
      // lock-delay covers them). A standby that streams without being synchronous is
      // asynchronous; Patroni's synchronous_mode shows as synchronous_standby_names.
      {"replication",
       "SELECT 'replication', 1, 'synchronous_commit=' || current_setting('synchronous_commit') ||"
       " ', synchronous_standby_names=''' || r.names || '''; ' || r.standbys || ' standby(s) streaming, ' ||"
       " r.synchronous || ' synchronous' || CASE WHEN r.names = '' AND r.standbys > 0 THEN ': asynchronous"
       " replication, so a failover can lose the last grants; after one, the failover lock-delay grants nothing for"
       " the longest TTL recorded' WHEN r.names <> '' THEN ': synchronous replication (Patroni synchronous_mode sets"
       " these names); a failover keeps every grant' ELSE '' END FROM (SELECT"
       " current_setting('synchronous_standby_names') AS names, (SELECT count(*) FROM pg_stat_replication) AS standbys,"
       " (SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')) AS synchronous) r"},
  };
  return s;
}

sql::SchemaStatements schema_statements(const BackendOptions& options) {
  // The DDL's transaction, in turns on an advisory transaction lock, is core's (begin, READ
  // COMMITTED, then SessionLock::transaction_lock).
  sql::SchemaStatements s = sql::schema_statements(dialect, schema_dialect, options, descriptor.name, descriptor.strategies);
  // A name must hold 255 bytes of any key (ShedLock's its own length); a unique key's columns
  // are its key columns (not INCLUDE's), an expression by its text. The tables in another schema
  // are read in the catalog, not information_schema: a table this role may not read still takes
  // the name. (Temporary schemas hold no dblock tables; with no current_schema() nothing is made
  // anyway.)
  s.columns = {"schema.columns",
               "SELECT table_name::text, column_name::text, NULL, (CASE column_name WHEN 'name' THEN data_type = 'text'"
               " OR data_type = 'character varying' AND (character_maximum_length IS NULL OR table_name = :shedlock"
               " OR character_maximum_length >= 255) WHEN 'token' THEN data_type = 'bigint' END)::int, data_type::text"
               " FROM information_schema.columns"
               " WHERE table_schema = current_schema() AND table_name IN (:locks, :runs, :claims, :shedlock)"
               " UNION ALL SELECT c.relname::text, pg_get_indexdef(i.indexrelid, k, true), i.indexrelid::regclass::text,"
               " NULL, NULL FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace,"
               " generate_series(1, i.indnkeyatts) k"
               " WHERE n.nspname = current_schema() AND c.relname IN (:locks, :runs, :claims, :shedlock)"
               " AND i.indisunique AND i.indimmediate AND i.indpred IS NULL"
               " UNION ALL SELECT c.relname::text, NULL, n.nspname::text, NULL, current_schema()::text"
               " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
               " WHERE c.relname IN (:locks, :shedlock) AND c.relkind IN ('r', 'p') AND n.nspname <> current_schema()"
               " AND n.nspname NOT LIKE 'pg\\_temp\\_%'"};
  if (options.shedlock) {
    // ShedLock's documented DDL; made only when missing (the Java services usually make it).
    s.create.push_back({options.shedlock_table, "CREATE TABLE IF NOT EXISTS " + quote_identifier(options.shedlock_table, '"') +
                       " (name VARCHAR(64) NOT NULL, lock_until TIMESTAMP NOT NULL, locked_at TIMESTAMP NOT NULL,"
                       " locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))"});
  }
  return s;
}

}  // namespace dblock::postgres

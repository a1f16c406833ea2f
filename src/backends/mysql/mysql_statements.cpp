// The MySQL/MariaDB dialect's statements (core/sql/statements.hpp has each one's contract). Every
// DATETIME is UTC, written and compared as UTC_TIMESTAMP(6), which no session setting moves: a
// session needs no time_zone of its own, and so no round trip to set one (ShedLock's TIMESTAMP
// columns excepted: Connection::open).
//
// An upsert's ON DUPLICATE KEY UPDATE takes a row only when its condition holds, each column
// IF(cond, new, old). MySQL assigns left to right, each assignment seeing the ones before
// (MariaDB may assign from the old row): the condition is tested once, in the first assignment,
// of the row as the statement found it, and the others read its answer (assign_each_if), so
// the columns may come in any order. Affected rows: 1 inserted, 2 taken, 0 left alone.

#include "backends/mysql/mysql_descriptor.hpp"
#include "backends/mysql/mysql_names.hpp"
#include "backends/mysql/mysql_tables.hpp"
#include "core/sql/identifiers.hpp"
#include "core/sql/lock_rows.hpp"
#include "core/sql/rules.hpp"

namespace dblock::mysql {
namespace {

// Whole milliseconds from one DATETIME to another (every one dblock writes is UTC), counted in
// the microseconds they keep: a time since the epoch (Dialect::epoch_ms) and since a row's last
// start (--min-interval's) alike.
std::string ms_between(std::string_view from, std::string_view to) {
  return "TIMESTAMPDIFF(MICROSECOND, " + std::string(from) + ", " + std::string(to) + ") DIV 1000";
}

// "column = IF(cond, value, column)" for each pair, comma-separated, with the condition written
// once: the first assignment keeps its answer in a user variable, which the others read. Its
// answer is the row's as the statement found it: the assignments run left to right, and each
// IF() re-testing the condition would read the columns those before it changed.
const std::string taking = "@took";  // short: every assignment and column of a take reads it
std::string assign_each_if(const std::string& cond, const sql::Assignments& columns) {
  std::string out;
  for (const auto& [c, value] : columns)
    out += (out.empty() ? c + " = IF(" + taking + " := " + cond : ", " + c + " = IF(" + taking) + ", " + value + ", " + c + ")";
  return out;
}

// Dialect::upsert: ON DUPLICATE KEY UPDATE, each column IF(the condition, new, old). It meets
// the row through any unique key, and a name the table's collation folds: only the row of the
// same name, byte for byte, is taken (ShedLock's name is a VARCHAR in the table's collation,
// where 'K', 'k' and 'K ' are one row; dblock's row of a name is byte-wise).
// `cond` as an operand of AND: in parentheses only when it has an OR (or XOR, ||) outside any, which
// binds looser than AND (a DBA reads one parenthesis level fewer).
std::string and_operand(const std::string& cond) {
  int depth = 0;
  bool quoted = false;
  for (std::size_t i = 0; i < cond.size(); ++i) {
    const char c = cond[i];
    if (c == '\'') quoted = !quoted;
    if (quoted) continue;
    depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    if (depth == 0 && (cond.compare(i, 4, " OR ") == 0 || cond.compare(i, 5, " XOR ") == 0 || cond.compare(i, 2, "||") == 0))
      return "(" + cond + ")";
  }
  return cond;
}

// Every DATETIME dblock writes is UTC_TIMESTAMP(6) (Dialect::now): the statement's start, the
// same wherever one statement reads it.
const std::string utc_now = "UTC_TIMESTAMP(6)";

// The value an update of `column` writes where it writes the inserted one: that value itself
// where it reads the same written twice (a bound parameter, or utc_now), which a DBA reads
// without looking it up in the VALUES list; else VALUES(column), computed once.
std::string inserted(const sql::Upsert& u, const std::string& column) {
  for (const auto& [c, value] : u.values) {
    if (c != column) continue;
    const bool parameter = value.size() > 1 && value[0] == ':' &&
                           value.find_first_not_of("abcdefghijklmnopqrstuvwxyz_0123456789", 1) == std::string::npos;
    if (parameter || value == utc_now) return value;
  }
  return "VALUES(" + column + ")";
}

std::string upsert(const sql::Upsert& u) {
  std::string columns, values;
  for (const auto& [column, value] : u.values) {
    columns += (columns.empty() ? "" : ", ") + column;
    values += (values.empty() ? "" : ", ") + value;
  }
  sql::Assignments set = u.set("");
  for (auto& [column, value] : set)
    if (value.empty()) value = inserted(u, column);
  return "INSERT INTO " + u.table + " (" + columns + ") VALUES (" + values + ") ON DUPLICATE KEY UPDATE " +
         (set.empty() ? "name = name" : assign_each_if("CAST(name AS BINARY) = VALUES(name) AND " + and_operand(u.when("")), set));
}

// The bytes of database, prefix and `key` (SQL) that a key's GET_LOCK names hash (key_hash).
// All parts as bytes: a key's UTF-8 must not meet the database name's collation.
std::string key_bytes(const Tables& t, std::string_view key) {
  return "CONCAT(CAST(DATABASE() AS BINARY), 0x00, CAST(" + quote_identifier(t.prefix, '\'') + " AS BINARY), 0x00, CAST(" +
         std::string(key) + " AS BINARY))";
}
// The SHA-256 (hex) of `bytes` (SQL, key_bytes's) that a key's GET_LOCK names take their digits
// from.
std::string sha256(const std::string& bytes) { return "SHA2(" + bytes + ", 256)"; }
std::string key_hash(const Tables& t, std::string_view key) { return sha256(key_bytes(t, key)); }
// `label` + the first `digits` hex digits of `hash` (each SQL; the hash key_hash's), then `tag`
// (SQL): one key's GET_LOCK names, at most 64 characters (the server's limit).
std::string hashed_name(const std::string& label, const std::string& digits, const std::string& hash,
                        std::string_view tag = {}) {
  return "CONCAT(" + label + ", LEFT(" + hash + ", " + digits + ")" + (tag.empty() ? "" : ", " + std::string(tag)) + ")";
}
// The two names a session holder keeps on a key: advisory's lock, and a row lock's holder tag
// (its label and digits, then the tag).
struct HeldName {
  std::string_view label;
  int digits;
  std::string label_sql() const { return "'" + std::string(label) + "'"; }
  // The name over `hash` (SQL, key_hash's), then `tag` (SQL).
  std::string of(const std::string& hash, std::string_view tag = {}) const {
    return hashed_name(label_sql(), std::to_string(digits), hash, tag);
  }
};
const HeldName advisory_name{"dblock:", 57}, tag_name{held_label, held_digits};
// The name `n` of `key` (SQL).
std::string lock_name(const Tables& t, const HeldName& n, std::string_view key, std::string_view tag = {}) {
  return n.of(key_hash(t, key), tag);
}

// The lock that proves a row's session holder (status, `release --force`), one of
// lock_statements' names, and the recorded connection id (holder_id): an id alone proves
// nothing, as the server hands ids out again after a restart. The holder tag's name carries the
// key's hash, so a tag copied from another key's row names a lock nobody holds. Each part of the
// name chosen by the strategy around one hash of the key: advisory's lock_name, or the tag's
// with the recorded tag. `row`: "" or an alias and its dot.
std::string holder_lock(const Tables& t, std::string_view row = "") {
  const std::string r(row);
  auto either = [&r](const std::string& advisory, const std::string& tagged) {
    return "IF(" + r + "strategy = 'advisory', " + advisory + ", " + tagged + ")";
  };
  return "CASE WHEN " + r + "strategy IN ('advisory', 'for-update', 'txn-insert') AND " + r + "session_id REGEXP " +
         either("'^[0-9]{1,20}$'", "'^[0-9]{1,20}:[0-9a-f]{32}$'") + " THEN " +
         hashed_name(either(advisory_name.label_sql(), tag_name.label_sql()),
                     either(std::to_string(advisory_name.digits), std::to_string(tag_name.digits)), key_hash(t, r + "name"),
                     either("''", "SUBSTRING_INDEX(" + r + "session_id, ':', -1)")) +
         " END";
}
std::string holder_id(std::string_view row = "") {
  return "CAST(SUBSTRING_INDEX(" + std::string(row) + "session_id, ':', 1) AS UNSIGNED)";
}

// The server's incarnation (failover.hpp): MySQL's server_uuid; MariaDB has none, but
// replication requires every server of a topology to have its own server_id, and a Galera
// cluster's nodes are one database, replicated synchronously (a node killed loses no grant).
std::string incarnation(bool mariadb) {
  return mariadb ? "IF(@@GLOBAL.wsrep_on, CONCAT('galera ', @@GLOBAL.wsrep_cluster_name),"
                   " CONCAT('server_id ', @@GLOBAL.server_id))"
                 : "CONCAT('server_uuid ', @@GLOBAL.server_uuid)";
}

// On MariaDB, whose takes read no row back (lease_statements), a read that fails (1242, which
// sends the run to the schema check: exit 78) unless <prefix>locks has a unique key on exactly
// its name, as its upserts need: a read of one table's keys in the catalog (each unique key's
// columns as "name1": its one column, `name`, whole; never NULL on MariaDB, which has no
// functional key parts, so NOT IN is never unknown), by the failover
// record's read (keyed_locks, a last column). The takes that read the gate themselves
// (mariadb_take, session.take, advisory's numbered take) find it closed instead (gate_sql),
// which sends core to that read of the record.
// MySQL's `taken` read finds a second row of the name instead.
// unique_keys(TABLE): the unique keys of the table TABLE (its own name), one row each.
// unkeyed(TABLE): NULL when the table TABLE has a unique key on exactly its name, else an error
// (1242: two rows).
std::string unique_keys(const std::string& table) {
  return "SELECT GROUP_CONCAT(LOWER(COLUMN_NAME), SUB_PART IS NULL) FROM information_schema.STATISTICS"
         " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = " + quote_identifier(table, '\'') +
         " AND NON_UNIQUE = 0 GROUP BY INDEX_NAME";
}
std::string unkeyed(const std::string& table) {
  return "(SELECT n FROM (SELECT 1 AS n UNION ALL SELECT 2) two WHERE 'name1' NOT IN (" + unique_keys(table) + "))";
}
std::string keyed_locks(const Tables& t, bool mariadb) {
  if (!mariadb) return "";
  return ", " + unkeyed(t.unquoted("locks"));
}

// Dialect::serving: whether the session's server is a Galera node: MariaDB always has wsrep_on
// (its incarnation reads it too); MySQL only in a Galera build, so it is looked up there.
std::string serving(const Tables&) {
  return "COALESCE((SELECT VARIABLE_VALUE IN ('ON', '1') FROM performance_schema.global_variables"
         " WHERE VARIABLE_NAME = 'wsrep_on'), 0)";
}
std::string mariadb_serving(const Tables& t) { return "@@GLOBAL.wsrep_on" + keyed_locks(t, true); }

// What core's rules (core/sql/rules.hpp) need spelled in MySQL.
const sql::Dialect dialect{
    .now = utc_now,
    // The epoch as a date's text, which MySQL's time functions read as a DATETIME.
    .epoch = "'1970-01-01'",
    .begin_unsynced = {},  // every commit waits for the disk
    // ShedLock's now, as its MySqlServerTimeStatementsSource writes it.
    .utc_now = "UTC_TIMESTAMP(3)",
    .ms_between = &ms_between,
    .plus_ms =
        [](std::string_view time, std::string_view ms) {
          return "TIMESTAMPADD(MICROSECOND, " + std::string(ms) + " * 1000, " + std::string(time) + ")";
        },
    .returning = [](std::string_view) { return std::string(); },
    .upsert = &upsert,
    .session_holds =
        [](std::string_view row, const Tables& t) {
          return "(IS_USED_LOCK(" + holder_lock(t, row) + ") = " + holder_id(row) + ") IS TRUE";
        },
    // Ended by release.end_session (KILL), read before the release (no RETURNING).
    .ended_session =
        [](std::string_view rows, const Tables& t) {
          return "SELECT IF(IS_USED_LOCK(h.held) = h.id, h.id, NULL), h.held FROM (SELECT " + holder_lock(t, "l.") +
                 " AS held, " + holder_id("l.") + " AS id FROM " + std::string(rows) + ") h";
        },
    .own_lease = {},  // none: the server's clock judges every lease
    // Named locks (GET_LOCK), held by the session, re-entrant; the server tells who holds one. A
    // wait is in whole seconds and more (:wait_ms / 1000), and the take without waiting is the
    // wait of 0. A name is at most 64 characters.
    .session_lock = {
        // advisory's lock (lock_statements).
        .key = [](const Tables& t, std::string_view name) { return lock_name(t, advisory_name, name); },
        .lock = [](std::string_view key, bool wait) {
          return "GET_LOCK(" + std::string(key) + (wait ? ", :wait_ms / 1000)" : ", 0)");
        },
        .unlock = [](std::string_view key) { return "RELEASE_LOCK(" + std::string(key) + ")"; },
        .holder = [](std::string_view key) { return "IS_USED_LOCK(" + std::string(key) + ")"; },
        // The name a for-update or txn-insert holder keeps while it holds the key, with :tag, its
        // lock session's 32 random hex digits (holder_lock).
        .tag = [](const Tables& t) { return lock_name(t, tag_name, ":key", ":tag"); },
    },
    // The take is core's (Dialect::take): no RETURNING, nor a read of the failover record in an
    // ON DUPLICATE KEY UPDATE (its assignments read no table): the upsert alone, admitted before
    // it (failover::admit).
    .release_returns = {},  // the waiters are woken by the holder's wake name (wake_statements)
    .incarnation = incarnation(false),
    .session_id = "CONNECTION_ID()",
    .serving = &serving,
};

// MariaDB's takes (10.5+): the upsert `up` answers with its row (RETURNING), which saves the
// read of `taken`. Its values are selected (`from`: " FROM ...", which may select no row: then
// nothing is written and nothing answered); with a VALUES list MariaDB's RETURNING answered NULL
// for the row it had just inserted. RETURNING gives the row after the statement whether it was
// taken or not, so @took says which: set to 1 by the inserted row's token (the values are
// computed first) and to the condition by the update that meets an existing row
// (assign_each_if). It answers each of `taken` (columns of the row) NULL when not taken, then
// `also` (", ..." or ""). The token last: the long value that says the row was inserted ends the
// list, whose short values share lines (dblock schema --statements).
std::string answered(const sql::Upsert& up, const std::string& from, const std::vector<std::string>& taken,
                     const std::string& also) {
  std::string columns, values, token;
  for (const auto& [column, value] : up.values) {
    if (column == "token") {
      token = "IF(" + taking + " := 1, " + value + ", NULL)";
      continue;
    }
    columns += (columns.empty() ? "" : ", ") + column;
    values += (values.empty() ? "" : ", ") + value;
  }
  std::string returned;
  for (const auto& c : taken) returned += (returned.empty() ? "" : ", ") + (c == "NULL" ? c : "IF(" + taking + ", " + c + ", NULL)");
  const std::string upserted = upsert(up), update = " ON DUPLICATE KEY UPDATE ";
  return "INSERT INTO " + up.table + " (" + columns + ", token) SELECT " + values + ", " + token + from +
         upserted.substr(upserted.find(update)) + " RETURNING " + returned + also;
}

// MariaDB's Dialect::take: `answered`, selected from the failover gate (failover.hpp), read
// here as PostgreSQL's take reads it: the upsert's one row is selected from `g`, the record
// (:record) when it names this server, no lock-delay is in force and it covers :ttl_ms, with its
// fence, and, for a session lock's numbering, the session the one the handshake gave
// (Take::handshake) on no Galera node, where the lock could not hold (SqlBackend::serving_check);
// otherwise no row, nothing taken and nothing answered, and core reads the gate itself
// (failover::admit_once). So a run reads the record in its take's round trip, not in one of its
// own. The lease's take says in the same answer why it took nothing (`refusal`'s columns, of
// the row as the take found it: a refused row is left as it was; Take::refused); what the take
// does once it took the row (Take::then: the holder's first step, Session::run reads the last
// columns) follows, NULL when it did not. The same read finds the gate closed
// unless <prefix>locks has a unique key on exactly its name, and nothing is written: core's own
// read of the record then asks the catalog again and fails (keyed_locks, 1242, which sends the
// run to the schema check: exit 78). A table keyed, as every run finds it, costs nothing more;
// one unkeyed, a read more on the way to its refusal. Reading the record, the statement locks it
// shared until it ends: a gate's write of the record (failover.move, raise_ttl) waits for the
// takes in flight, no longer.
// The gate's read (a row of the record, `fence`, when it is open here), on table `locks` (named
// `name`: and keyed on its name; "": no check of its key), ANDed with `more`.
std::string gate_sql(const std::string& locks, const std::string& name, const std::string& more = "") {
  return "SELECT r.token AS fence FROM " + locks + " r WHERE r.name = :record AND " +
         sql::failover_open_conditions(dialect, "r.", "r.owner = " + incarnation(true)) +
         (name.empty() ? "" : " AND 'name1' IN (" + unique_keys(name) + ")") + more;
}

std::string mariadb_take(const sql::Take& k) {
  const sql::Upsert up = k.upsert("g.fence");
  std::string also = k.refused ? ", " + k.refused("") : "";
  for (const auto& c : k.then)
    also += ", IF(" + taking + (k.then_if.empty() ? "" : " AND " + k.then_if) + ", " + c + ", NULL)";
  const std::string here = k.handshake.empty() ? "" : " AND (:started_id IS NULL OR NOT @@GLOBAL.wsrep_on AND " + k.handshake + ")";
  return answered(up, " FROM (" + gate_sql(up.table, k.table_name, here) + ") g", k.returning, also);
}

// A block of statements sent as one (Dialect::block; MariaDB 10.1+: BEGIN NOT ATOMIC), its
// parameters bound as any statement's: any error rolls the whole back and is the block's, its
// native code as raised (RESIGNAL). Core's lease.release_recorded and history.record are such
// blocks: a lease run's release with its history row and its trim is one round trip, where a
// transaction of its own cost four (START TRANSACTION, the release, the history row, the oldest
// row's read) and a COMMIT, and a session strategy's history row after its lock is given back
// likewise. Its local variables are declared before the handler, as MariaDB asks.
std::string mariadb_block(std::string_view variables, std::string_view body) {
  return "BEGIN NOT ATOMIC " + std::string(variables) + "DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END; " +
         std::string(body) + " END";
}

// MariaDB's dialect: MySQL's, but for its take and its blocks.
const sql::Dialect mariadb_dialect = [] {
  sql::Dialect d = dialect;
  d.take = &mariadb_take;
  d.block = &mariadb_block;
  d.incarnation = incarnation(true);
  d.serving = &mariadb_serving;
  return d;
}();

// How MySQL spells dblock's tables (core/sql/tables.hpp). name is VARBINARY: compared
// byte-wise, and 255 bytes of any UTF-8 fit. DATETIME(6) holds UTC (UTC_TIMESTAMP(6), which no
// session's time_zone moves). CREATE INDEX has no IF NOT EXISTS: the index is in its CREATE TABLE.
const sql::tables::SchemaDialect schema_dialect{
    .quote = '`',
    .type =
        [](sql::tables::Type t) -> std::string {
          using sql::tables::Type;
          switch (t) {
            case Type::name: return "VARBINARY(255)";
            case Type::text: return "VARCHAR(255)";
            case Type::word: return "VARCHAR(16)";
            case Type::session: return "VARCHAR(64)";
            case Type::int64: return "BIGINT";
            case Type::int32: return "INT";
            case Type::timestamp: return "DATETIME(6)";
            case Type::id: break;
          }
          return "BIGINT";
        },
    .identity = "BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY",
    .table_options = " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
    .inline_index = [](std::string_view name, std::string_view columns) {
      return "KEY " + std::string(name) + " (" + std::string(columns) + ")";
    },
};

// The failover fence a token must exceed (failover.hpp), as the statements bind it.
const std::string fence = ":fence";

}  // namespace

// MariaDB's session.take is its take's (mariadb_take): it answers its row, so no read of
// `taken` follows it.
sql::LeaseStatements lease_statements(const std::string& prefix, bool mariadb) {
  return sql::lease_statements(mariadb ? mariadb_dialect : dialect, Tables(prefix, '`'));
}

sql::ShedlockStatements shedlock_statements(const BackendOptions& options) {
  return sql::shedlock_statements(dialect, Tables(options.table_prefix, '`'), quote_identifier(options.shedlock_table, '`'));
}

sql::InspectStatements inspect_statements(const BackendOptions& options) {
  return sql::inspect_statements(dialect, schema_dialect, options);
}

sql::ReleaseStatements release_statements(const std::string& prefix) {
  sql::ReleaseStatements s = sql::release_statements(dialect, Tables(prefix, '`'));
  // Asked again in the KILL itself; 0, no such session: the holder ended by itself meanwhile.
  // The session is gone once the server no longer shows it holding the lock (core's
  // session_gone): a killed session rolls its transaction back, which lets its row lock go,
  // before it gives its named locks back.
  s.end_session = {"release.end_session", "KILL CONNECTION IF(IS_USED_LOCK(:lock) = :session, :session, 0)"};
  return s;
}

sql::DoctorStatements doctor_statements(const BackendOptions& options, bool mariadb) {
  sql::DoctorStatements s = sql::doctor_statements(dialect, schema_dialect, options);
  // No `serving`: the failover record's read answers it (failover_statements).
  s.checks = {
      // A lease run's session sets no idle limit (Connection::open): its renewals keep it busy.
      {"wait_timeout",
       "SELECT 'wait_timeout', 1, CONCAT('server wait_timeout is ', @@GLOBAL.wait_timeout, ' s; dblock sets its own on"
       " the sessions that sit idle while a job runs: a lock holder''s 2 x TTL + 5 s (its renewals keep it busy; a"
       " holder cut off from the server loses the lock after that), a session strategy''s bookkeeping session a year;"
       " a lease run''s renewals (every TTL/3) keep its session busy, and one the server ended is opened again')"},
      // MySQL without Galera has no wsrep_on. dblock's conditional writes are certified whatever
      // wsrep_sync_wait says.
      {"galera",
       "SELECT 'galera', NOT (g.wsrep AND :session), IF(g.wsrep, CONCAT('Galera cluster (wsrep_on=ON, synchronous"
       " replication, wsrep_sync_wait=', COALESCE(g.sync_wait, '?'), ')', IF(:session, CONCAT(': GET_LOCK, FOR UPDATE"
       " and an uncommitted INSERT lock one node only, so ', :strategy, ' is unsafe; use --strategy lease'), ': the lease strategy is"
       " safe here')), 'not a Galera cluster (wsrep_on is off or absent)') FROM (SELECT COALESCE(MAX(VARIABLE_NAME ="
       " 'wsrep_on' AND VARIABLE_VALUE IN ('ON', '1')), 0) AS wsrep, MAX(IF(VARIABLE_NAME = 'wsrep_sync_wait',"
       " VARIABLE_VALUE, NULL)) AS sync_wait FROM " +
           std::string(mariadb ? "information_schema.GLOBAL_VARIABLES" : "performance_schema.global_variables") +
           " WHERE VARIABLE_NAME IN ('wsrep_on', 'wsrep_sync_wait')) g"},
      // Without the PROCESS privilege an account sees only its own sessions in PROCESSLIST (and
      // KILL ends only those); status reads IS_USED_LOCK, which every account sees.
      // KILL of another account's session needs CONNECTION ADMIN (MariaDB 10.5+, MySQL 8) or SUPER.
      {"processlist",
       "SELECT 'processlist', 1, IF(p.n > 0 AND p.k > 0, 'PROCESS and CONNECTION ADMIN (or SUPER): release --force"
       " can end every holder''s session and see it end', 'without PROCESS and CONNECTION ADMIN (or SUPER) release"
       " --force sees and ends only this account''s sessions, so use one account on every host') FROM (SELECT"
       " SUM(PRIVILEGE_TYPE = 'PROCESS') AS n, SUM(PRIVILEGE_TYPE IN ('CONNECTION ADMIN', 'SUPER')) AS k FROM"
       " information_schema.USER_PRIVILEGES WHERE GRANTEE = CONCAT('''', SUBSTRING_INDEX(CURRENT_USER(), '@', 1),"
       " '''@''', SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')) p WHERE :session"},
  };
  return s;
}

sql::LockStatements lock_statements(const std::string& prefix, bool mariadb) {
  return lock_statements(prefix, mariadb, lease_statements(prefix, mariadb));
}

sql::LockStatements lock_statements(const std::string& prefix, bool mariadb, const sql::LeaseStatements& lease) {
  const Tables t(prefix, '`');
  // The name a for-update or txn-insert holder keeps while it holds the key (SessionLock::tag).
  const std::string held = dialect.session_lock.tag(t);
  sql::LockStatements s;
  // The advisory take is core's over the session lock (lock.advisory_wait): GET_LOCK is
  // re-entrant on one connection, so a key this session holds answers NULL, not a second hold.
  if (mariadb) {
    // The lock and the row in one statement, in the session that holds the lock (a named lock
    // outlives the commit): session.take's upsert, run only when the lock was taken, and its row
    // read back (RETURNING; RETURNING of a refused row says NULL, as mariadb_take's). The lock is
    // taken once, before the row, re-entrant as lock.advisory_wait, its name computed once
    // (@lock). Its time is the grant's: each statement of a block has its own start,
    // which UTC_TIMESTAMP reads, and the upsert's starts once the lock is granted. The lock's
    // answer goes to a variable (a SET answers nothing), so that the block answers once either
    // way: the row taken, or the refusal. advisory's lock: "dblock:" + 57 hex digits of the
    // key's hash, so two databases on one server never share one (set in two statements, the
    // key's bytes, then the name of their hash, which a DBA reads in two lines where one nested
    // call took eight). The block's own variables are short (@lock, @got, @fence): each is
    // read more than once. The upsert's values are
    // selected (FROM DUAL): with a VALUES list MariaDB's RETURNING answered NULL for the row it
    // had just inserted.
    const std::string lock = "SET @lock = " + key_bytes(t, ":key") + "; SET @lock = " + advisory_name.of(sha256("@lock")) +
                             "; SET @got = IF(IS_USED_LOCK(@lock) <=> CONNECTION_ID(), NULL, " +
                             dialect.session_lock.lock("@lock", true) + ")";
    const std::string insert = answered(sql::session_upsert(dialect, t, "@fence", dialect.now, dialect.now), " FROM DUAL",
                                        {"token", sql::epoch_ms_sql(dialect, "acquired_at"), "NULL"}, ", 1");
    // Refused, the key's row as core's refusal reads it (lease.refusal), after four columns
    // that say so (0): a contender needs no read of its own (session_locker's busy()).
    const std::string& refusal = lease.refusal.text;
    const std::string refused = "SELECT NULL, NULL, NULL, 0, " + refusal.substr(refusal.find(' ') + 1);
    // In a block of statements (BEGIN NOT ATOMIC, whose one SELECT or INSERT's RETURNING is the answer), after
    // the holder's idle limits (:idle_s, MysqlHolder::bind): a holder cut off from the server
    // loses the lock after them, and they cost no round trip of their own. A contender that is
    // refused keeps them: it ends, or waits in GET_LOCK, which is no idle time.
    // Without a :fence (core read no gate: a take that does not wait, the first on its
    // connection) it reads the failover record itself, as session.take does (lease_statements),
    // locked shared in a transaction with the take, which waits for nothing: closed (or a
    // session lock that could not hold here), it takes nothing and answers (NULL, NULL, NULL,
    // 2), and core reads the record apart. Refused the lock, it answers (NULL, NULL, NULL, 0)
    // and the key's row, which core read in a round trip of its own. Any error rolls back and
    // is the block's. Its read of the record is the takes' gate (gate_sql), which asks whether
    // <prefix>locks has a unique key on exactly its name: closed without one, so nothing is
    // locked or written, and core's own read of the record fails (keyed_locks, 1242: exit 78).
    // The block reads the record only where core has not read it on this session, so core always
    // binds :started_id there (a NULL would close the gate: fail closed).
    const std::string gate = gate_sql(t.locks, t.unquoted("locks"), " AND (NOT @@GLOBAL.wsrep_on AND CONNECTION_ID() = :started_id)");
    const std::string numbered = mariadb_block(
        "", "SET SESSION wait_timeout = :idle_s, SESSION interactive_timeout = :idle_s, @fence = :fence; IF"
                " @fence IS NULL AND :wait_ms = 0 THEN START TRANSACTION; " +
        gate.substr(0, gate.find(" FROM ")) + " INTO @fence" + gate.substr(gate.find(" FROM ")) +
        " LOCK IN SHARE MODE; END IF; IF @fence IS NULL THEN SELECT NULL, NULL, NULL, 2; ELSE " + lock +
        "; IF @got = 1 THEN " + insert + "; ELSE " + refused +
        "; END IF; END IF; COMMIT;");
    s.advisory_numbered_wait = {"lock.advisory_numbered_wait", numbered};
  }
  // The lease's release of the row that gives the lock back (lock.advisory_release_row) is
  // core's, in the holder session, which is the bookkeeping one (mysql_session_lock.cpp).
  s.lock_wait = {"lock.wait", "SET SESSION innodb_lock_wait_timeout = :seconds"};
  // The key's wake name: a plain key's holder keeps it in this session, whose end (ROLLBACK
  // RELEASE, mysql_session_lock.cpp) gives back the row lock, the holder tag and the wake name in
  // one round trip, in that order, so the waiter it wakes finds the row free. for-update's
  // lock.claim takes both with the row's lock, and gives the tag back (lock.untag): core's.
  const std::string wake = dialect.session_lock.lock(":wake", false);
  // txn-insert's INSERT waits for another holder's only on a unique key of (name, kind): on a
  // claims table without one, both would insert and hold. The tag, run after that INSERT, then
  // reads one row too many (1242; a SELECT: DO drops the error), which sends the run to the
  // schema check (exit 78). A read of one table's keys in the catalog, well under a
  // millisecond; no statement more.
  const std::string keyed = "SELECT 1 FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = " +
                            quote_identifier(t.prefix + "claims", '\'') +
                            " AND NON_UNIQUE = 0 GROUP BY INDEX_NAME HAVING COUNT(*) = 2 AND"
                            " SUM(LOWER(COLUMN_NAME) IN ('name', 'kind') AND SUB_PART IS NULL) = 2";
  s.tag = {"lock.tag", "SELECT " + dialect.session_lock.lock(held, false) + ", (SELECT n FROM (SELECT 1 AS n UNION ALL SELECT 2) two"
                       " WHERE NOT EXISTS (" + keyed + ")), " + wake};
  // MariaDB's runs a block: its row-lock numbering that proves the grant is its session.take
  // behind that proof (core's lock.row_numbered).
  sql::LockStatements out = sql::lock_statements(mariadb ? mariadb_dialect : dialect, t, std::move(s), lease.session_take);
  // Busy only when another holds the row: a table's metadata lock (a concurrent first run's
  // CREATE TABLE, a DBA's ALTER) is waited for, as every statement waits for it
  // (lock_wait_timeout). MySQL's NOWAIT (core's lock_claim_nowait) is about row locks only;
  // MariaDB's is about metadata locks too, so there the holder session's
  // innodb_lock_wait_timeout = 0 (MySQL's least is 1 s) answers a held row at once instead.
  if (mariadb) out.lock_claim_nowait = {"lock.claim_nowait", out.lock_claim.text};
  return out;
}

WakeStatements wake_statements(const std::string& prefix, bool mariadb) {
  return sql::wake_statements(mariadb ? mariadb_dialect : dialect, Tables(prefix, '`'));
}

sql::SchemaStatements schema_statements(const BackendOptions& options) {
  // DDL commits on its own (no `begin`): CREATE TABLE IF NOT EXISTS is safe to race. The
  // failover record's incarnation differs between MariaDB and MySQL, and a script cannot know
  // which server it meets: core's record in MariaDB's (CHR: 10.3.1), in a MariaDB-only comment
  // (/*M! ... */), which MySQL skips; there the first run makes the record. The script says so
  // in the statement's own comment lines.
  sql::SchemaStatements s = sql::schema_statements(mariadb_dialect, schema_dialect, options, descriptor.name, descriptor.strategies);
  s.failover_record = "-- MariaDB runs the next statement (a /*M! comment); MySQL skips it, and there the\n"
                      "-- first run makes the record (an INSERT).\n/*M!100301 " + s.failover_record + " */";
  // A name must hold 255 bytes of any key (ShedLock's its own length), whole: a TEXT column
  // can be a key only by a prefix, which would merge names that share it.
  s.columns = {"schema.columns",
               "SELECT TABLE_NAME, LOWER(COLUMN_NAME), NULL, CASE LOWER(COLUMN_NAME) WHEN 'name' THEN"
               " DATA_TYPE IN ('varchar', 'varbinary') AND (TABLE_NAME = :shedlock OR CHARACTER_MAXIMUM_LENGTH >= 255)"
               " WHEN 'token' THEN DATA_TYPE = 'bigint' END, COLUMN_TYPE FROM information_schema.COLUMNS"
               " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN (:locks, :runs, :claims, :shedlock)"
               " UNION ALL SELECT TABLE_NAME, IF(SUB_PART IS NULL, LOWER(COLUMN_NAME), NULL), INDEX_NAME, NULL, NULL"
               " FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND NON_UNIQUE = 0"
               " AND TABLE_NAME IN (:locks, :runs, :claims, :shedlock)"};
  if (options.shedlock) {
    // ShedLock's documented DDL; made only when missing (the Java services usually make it).
    s.create.push_back({options.shedlock_table, "CREATE TABLE IF NOT EXISTS " + quote_identifier(options.shedlock_table, '`') +
                       " (name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL,"
                       " locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), locked_by VARCHAR(255) NOT NULL,"
                       " PRIMARY KEY (name))"});
  }
  return s;
}

}  // namespace dblock::mysql

// The SQLite dialect's statements for the strategies of core/sql (statements.hpp
// has each one's contract). There is no server clock: leases and --min-interval are judged on
// CLOCK_BOOTTIME with the boot id, through dblock_boot_ms() / dblock_boot_id()
// (sqlite_tables.hpp); the wall-clock columns are for display and history. Timestamps are TEXT
// 'YYYY-MM-DD HH:MM:SS.SSS' in UTC, written by SQLite's own clock, so a DBA can read them and
// they sort as they compare.

#include "backends/sqlite/sqlite_descriptor.hpp"
#include "backends/sqlite/sqlite_tables.hpp"
#include "core/sql/lock_rows.hpp"
#include "core/sql/rules.hpp"

namespace dblock::sqlite {
namespace {

/// SQL: true when the boot_* columns of the row (`a` is "" or an alias with its dot) judge its
/// lease: they belong to its current token (an older dblock that took the row left them stale)
/// and both the row and this process know their boot.
std::string boot_judged_sql(const std::string& a) {
  return "(" + a + "boot_token IS " + a + "token AND " + a + "boot_id IS NOT NULL AND dblock_boot_id() IS NOT NULL)";
}

/// SQL: true when the row's boot lease is judged (boot_judged_sql) and is of this boot. The
/// equality holds only where both ids are known, so it says all boot_judged_sql's IS NOT NULLs
/// say, in fewer nodes for every prepare (docs/performance.md, SQLite, round five).
std::string this_boot_sql(const std::string& a) {
  return a + "boot_token IS " + a + "token AND " + a + "boot_id = dblock_boot_id()";
}

/// Milliseconds since the row's last start, for --min-interval: CLOCK_BOOTTIME within one
/// boot (NULL where the boot's start is not known); across a reboot only the wall clock spans
/// the gap. `a` is "" or an alias and its dot.
std::string started_ago_sql(const std::string& a) {
  return "COALESCE(CASE WHEN " + this_boot_sql(a) + " THEN dblock_boot_ms() - " + a + "boot_started_ms END, " +
         ms_between_sql(a + "last_started_at", "'now'") + ")";
}

/// The boot lease renewed (OwnLease::renew): it now belongs to this boot and the row's token,
/// ending `ms` from now. The start keeps its boot reading only when it was taken on this boot.
sql::Assignments renew_boot(std::string_view ms) {
  return {{"boot_started_ms", "CASE WHEN " + this_boot_sql("") + " THEN boot_started_ms END"},
          {"boot_id", "dblock_boot_id()"},
          {"boot_token", "token"},
          {"boot_expires_ms", "dblock_boot_ms() + " + std::string(ms)}};
}

// Added to <prefix>locks after its first shape. The boot_* columns hold the lease on
// CLOCK_BOOTTIME, which a wall-clock step cannot move; they apply only while boot_token equals
// token (an older dblock that takes the row leaves them stale).
using sql::tables::Type;
constexpr sql::tables::Column boot_columns[] = {
    {.name = "boot_id",
     .type = Type::text,
     .since = sql::tables::own_lease_shape,
     .comment = "/proc/sys/kernel/random/boot_id of the lease host"},
    {.name = "boot_token",
     .type = Type::int64,
     .since = sql::tables::own_lease_shape,
     .comment = "the token the boot_* columns belong to"},
    {.name = "boot_started_ms",
     .type = Type::int64,
     .since = sql::tables::own_lease_shape,
     .comment = "CLOCK_BOOTTIME ms of the acquisition"},
    {.name = "boot_expires_ms",
     .type = Type::int64,
     .since = sql::tables::own_lease_shape,
     .comment = "CLOCK_BOOTTIME ms of the end of the lease"},
};

// How SQLite spells dblock's tables (core/sql/tables.hpp): TEXT and INTEGER (64-bit); a TEXT
// name compares byte-wise (BINARY collation). No claims: SQLite has no session strategies
// (its descriptor's).
const sql::tables::SchemaDialect schema_dialect{
    .type = [](Type t) -> std::string { return t == Type::int64 || t == Type::int32 ? "INTEGER" : "TEXT"; },
    .identity = "INTEGER PRIMARY KEY AUTOINCREMENT",
    .type_comment =
        [](Type t) { return t == Type::timestamp ? std::string("UTC 'YYYY-MM-DD HH:MM:SS.SSS'") : std::string(); },
    .own_columns = boot_columns,
};

// What core's rules (core/sql/rules.hpp) need spelled in SQLite; the time the row's last start
// is judged at is always this process's (started_ago_sql).
const sql::Dialect dialect{
    .now = now_sql(),
    // Now's milliseconds as a time are now (the same text, with no conversion to parse).
    .time_of_ms =
        [](std::string_view ms) {
          if (ms == epoch_ms_sql(now_sql())) return now_sql();
          return "strftime('%Y-%m-%d %H:%M:%f', " + std::string(ms) + " / 1000.0, 'unixepoch')";
        },
    .started_ms_ago = [](std::string_view row, std::string_view) { return started_ago_sql(std::string(row)); },
    .lease_live = [](std::string_view row, std::string_view) { return lease_live_sql(std::string(row)); },
    .begin = "BEGIN IMMEDIATE",
    // Only the acquisition carries a token that must survive a power loss. A lost release leaves
    // a lease that is over after the reboot anyway (a lease from an earlier boot is expired), and
    // the next acquisition's fsync of the WAL makes this commit durable too: one fsync per run.
    .begin_unsynced = std::string(begin_unsynced),
    // Times are UTC text 'YYYY-MM-DD HH:MM:SS.SSS', so they compare as text. SQLite has no server
    // clock: ShedLock's lock_until (Dialect::utc_now, `now`) is the wall clock's, which its Java
    // clients read.
    .epoch_ms = &epoch_ms_sql,
    // julianday arithmetic is rounded back to whole milliseconds by strftime; 'now' is whole
    // milliseconds already (now_plus_sql).
    .plus_ms =
        [](std::string_view time, std::string_view ms) {
          if (time == now_sql()) return now_plus_sql(ms);
          return "strftime('%Y-%m-%d %H:%M:%f', julianday(" + std::string(time) + ") + " + std::string(ms) +
                 " / 86400000.0)";
        },
    .json_texts = [](std::string_view param) { return "(SELECT value FROM json_each(" + std::string(param) + "))"; },
    // RETURNING, ON CONFLICT and the take are core's (Dialect::returning, upsert, take); there
    // are no server sessions (session_holds, ended_session). The whole file is locked for the
    // write (BEGIN IMMEDIATE, or the statement's own), so the take's upsert waits for no row;
    // there is no failover gate.
    // The lease on CLOCK_BOOTTIME (boot_*), judged only while boot_judged_sql holds and on this
    // boot: a lease of another boot is over with it, and where the boot is not known the wall
    // clock judges.
    .own_lease = {
        .live =
            [](std::string_view row) {
              const std::string r(row);
              return "CASE WHEN " + this_boot_sql(r) + " THEN " + r + "boot_expires_ms > dblock_boot_ms() END";
            },
        .start =
            [](std::string_view token, std::string_view ms) {
              return sql::Assignments{{"boot_id", "dblock_boot_id()"},
                                      {"boot_token", std::string(token)},
                                      {"boot_started_ms", "dblock_boot_ms()"},
                                      {"boot_expires_ms", "dblock_boot_ms() + " + std::string(ms)}};
            },
        .renew = &renew_boot,
        .end =
            [](std::string_view min_hold) {
              return sql::Assignments{{"boot_expires_ms", min_hold.empty() ? std::string("dblock_boot_ms()")
                                                                           : "max(boot_started_ms + " + std::string(min_hold) +
                                                                                 ", dblock_boot_ms())"}};
            },
    },
    .release_returns = {},  // the waiters are woken through the wake file (sqlite_wake.hpp)
    .incarnation = {},      // one file, no replica to fail over to
    .session_id = {},       // no server sessions
    .serving = {},
};

}  // namespace

std::string lease_live_sql(const std::string& a) {
  return "COALESCE(CASE WHEN " + boot_judged_sql(a) + " THEN " + a + "boot_id = dblock_boot_id() AND " + a +
         "boot_expires_ms > dblock_boot_ms() ELSE julianday(" + a + "expires_at) > julianday('now') END, 0)";
}

sql::SchemaStatements schema_statements(const BackendOptions& options) {
  sql::SchemaStatements s = sql::tables::schema_statements(schema_dialect, options, descriptor.name, descriptor.strategies);
  // One write transaction: one commit (one fsync) on a new file, and processes upgrading the
  // same file at once add each column once.
  s.begin = dialect.begin;
  // The columns, with the affinity of name (TEXT: '007' and '7' stay two keys) and token
  // (INTEGER, 64-bit), then each column of each unique index that is not partial (a TEXT
  // primary key is one, sqlite_autoindex_*); an expression's column has no name.
  std::string columns;
  for (const char* table : {":locks", ":runs", ":shedlock"}) {
    const std::string tn = table;
    columns += std::string(columns.empty() ? "" : " UNION ALL ") + "SELECT " + tn +
               ", name, NULL, CASE name WHEN 'name' THEN upper(type) NOT LIKE '%INT%' AND (type = '' OR upper(type)"
               " LIKE '%CHAR%' OR upper(type) LIKE '%CLOB%' OR upper(type) LIKE '%TEXT%') WHEN 'token' THEN"
               " upper(type) LIKE '%INT%' END, type FROM pragma_table_info(" + tn + ")";
    if (tn != ":runs")
      columns += " UNION ALL SELECT " + tn + ", ii.name, il.name, NULL, NULL FROM pragma_index_list(" + tn +
                 ") il JOIN pragma_index_info(il.name) ii WHERE il.\"unique\" AND NOT il.partial";
  }
  s.columns = {"schema.columns", columns};
  if (options.shedlock) {
    // ShedLock has no SQLite DDL of its own: its generic one, timestamps as UTC text
    // 'YYYY-MM-DD HH:MM:SS.SSS' (what strftime('%Y-%m-%d %H:%M:%f', 'now') writes).
    s.create.push_back({options.shedlock_table, "CREATE TABLE IF NOT EXISTS " + quote_ident(options.shedlock_table) +
                       " (name VARCHAR(64) PRIMARY KEY, lock_until TIMESTAMP(3), locked_at TIMESTAMP(3), locked_by "
                       "VARCHAR(255))"});
  }
  return s;
}

sql::LeaseStatements lease_statements(const std::string& prefix) {
  const Tables t(prefix, '"');
  sql::LeaseStatements s = sql::lease_statements(dialect, t);
  // No FOR UPDATE: `begin` locks the whole file.
  s.lock_row = {"lock_row", "SELECT 1 FROM " + t.locks + " WHERE name = :key"};
  return s;
}

sql::ShedlockStatements shedlock_statements(const BackendOptions& options) {
  return sql::shedlock_statements(dialect, Tables(options.table_prefix, '"'), quote_ident(options.shedlock_table));
}

sql::InspectStatements inspect_statements(const BackendOptions& options) {
  return sql::inspect_statements(dialect, schema_dialect, options);
}

sql::ReleaseStatements release_statements(const std::string& prefix) {
  return sql::release_statements(dialect, Tables(prefix, '"'));  // no sessions to end
}

}  // namespace dblock::sqlite

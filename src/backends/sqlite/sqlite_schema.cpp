#include "backends/sqlite/sqlite_tables.hpp"

#include "backends/common/dsn.hpp"

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace dblock::sqlite {
namespace {

// Timestamps are TEXT 'YYYY-MM-DD HH:MM:SS.SSS' in UTC, written by SQLite's own clock, so a
// DBA can read them and they sort as they compare. The required columns are common
// (common/lock_rows.hpp); these were added after the first release, so ensure_schema adds them
// to an older table. They hold the lease on CLOCK_BOOTTIME, which a wall-clock step cannot
// move; they apply only while boot_token equals token (an older dblock that takes the row
// leaves them stale).
struct AddedColumn {
  std::string_view name;
  std::string_view type;
};
constexpr std::array<AddedColumn, 4> boot_columns{{
    {"boot_id", "TEXT"},
    {"boot_token", "INTEGER"},
    {"boot_started_ms", "INTEGER"},
    {"boot_expires_ms", "INTEGER"},
}};
// A semaphore's header row records its slot count here (src/backends/README.md, Semaphores);
// NULL on every other row. Plain locks never read it, so check_schema does not require it.
constexpr AddedColumn slots_column{"slots", "INTEGER"};

std::string epoch_ms_of(std::string_view expr) { return epoch_ms_sql(expr); }

using TableShape = std::vector<std::pair<std::string, std::int64_t>>;  // column name, pk position

Result<TableShape> read_shape(const Connection& conn, const std::string& table) {
  auto stmt = conn.prepare("SELECT name, pk FROM pragma_table_info(?1)");
  if (!stmt) return std::unexpected(stmt.error());
  stmt->bind(1, std::string_view(table));
  TableShape found;
  for (;;) {
    auto row = stmt->step("reading the shape of table " + table);
    if (!row) return std::unexpected(row.error());
    if (!*row) return found;
    found.emplace_back(stmt->text(0), stmt->int64(1));
  }
}

bool has_column(const TableShape& shape, std::string_view column) {
  for (const auto& found : shape)
    if (found.first == column) return true;
  return false;
}

Result<void> check_table(const Connection& conn, const std::string& table, std::span<const std::string_view> wanted,
                         bool name_is_key) {
  auto shape = read_shape(conn, table);
  if (!shape) return std::unexpected(shape.error());
  const TableShape& found = *shape;
  for (std::string_view column : wanted) {
    if (!has_column(found, column))
      return fail(ErrorKind::config, "table " + table + " in " + conn.path() +
                                         " has an unexpected shape: column " + std::string(column) +
                                         " is missing (see `dblock schema --dialect sqlite`)");
  }
  if (name_is_key) {
    for (const auto& [name, pk] : found)
      if (name == "name" && pk != 1)
        return fail(ErrorKind::config, "table " + table + " in " + conn.path() +
                                           " has an unexpected shape: column name is not its primary key");
  }
  return {};
}

bool has_boot_columns(const TableShape& shape) {
  for (const auto& column : boot_columns)
    if (!has_column(shape, column.name)) return false;
  return true;
}

/// Adds the columns (boot_*, slots) a table made by an older dblock lacks, inside the caller's
/// write transaction, so processes upgrading the same file at once add each column once.
Result<void> add_missing_columns(const Connection& conn, const std::string& table) {
  auto shape = read_shape(conn, table);
  if (!shape) return std::unexpected(shape.error());
  std::vector<AddedColumn> added(boot_columns.begin(), boot_columns.end());
  added.push_back(slots_column);
  for (const auto& column : added) {
    if (has_column(*shape, column.name)) continue;
    if (auto ok = conn.exec("ALTER TABLE " + quote_ident(table) + " ADD COLUMN " + std::string(column.name) + " " +
                                std::string(column.type),
                            "adding column " + std::string(column.name) + " to table " + table);
        !ok)
      return ok;
  }
  return {};
}

/// Read only: both tables exist with every column (the boot columns too) and the history
/// index exists. The common case of every command on an existing database, which then writes
/// nothing (a write would cost a commit and its fsync).
Result<bool> schema_complete(const Connection& conn, const std::string& prefix) {
  auto locks = read_shape(conn, prefix + "locks");
  if (!locks) return std::unexpected(locks.error());
  auto runs = read_shape(conn, prefix + "runs");
  if (!runs) return std::unexpected(runs.error());
  for (std::string_view column : rows::locks_columns)
    if (!has_column(*locks, column)) return false;
  for (std::string_view column : rows::runs_columns)
    if (!has_column(*runs, column)) return false;
  if (!has_boot_columns(*locks) || !has_column(*locks, slots_column.name)) return false;
  auto index = conn.prepare("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?1");
  if (!index) return std::unexpected(index.error());
  const std::string index_name = prefix + "runs_name_id";
  index->bind(1, std::string_view(index_name));
  return index->step("looking for the history index");
}

std::string tables_sql(const std::string& prefix) {
  const std::string locks = quote_ident(prefix + "locks");
  const std::string runs = quote_ident(prefix + "runs");
  return "CREATE TABLE IF NOT EXISTS " + locks +
         " (\n"
         "  name             TEXT    NOT NULL PRIMARY KEY,  -- BINARY collation: byte-wise\n"
         "  owner            TEXT,\n"
         "  host             TEXT,\n"
         "  pid              INTEGER,\n"
         "  token            INTEGER NOT NULL DEFAULT 0,    -- fencing token, +1 per acquisition\n"
         "  strategy         TEXT,\n"
         "  session_id       TEXT,\n"
         "  acquired_at      TEXT,                          -- UTC 'YYYY-MM-DD HH:MM:SS.SSS'\n"
         "  renewed_at       TEXT,\n"
         "  expires_at       TEXT,\n"
         "  released_at      TEXT,\n"
         "  last_started_at  TEXT,\n"
         "  last_finished_at TEXT,\n"
         "  last_exit_code   INTEGER,\n"
         "  boot_id          TEXT,     -- /proc/sys/kernel/random/boot_id of the lease's host\n"
         "  boot_token       INTEGER,  -- the token the boot_* columns belong to\n"
         "  boot_started_ms  INTEGER,  -- CLOCK_BOOTTIME ms of the acquisition\n"
         "  boot_expires_ms  INTEGER,  -- CLOCK_BOOTTIME ms of the end of the lease\n"
         "  slots            INTEGER   -- a semaphore's header row: its slot count (--slots)\n"
         ");\n"
         "CREATE TABLE IF NOT EXISTS " +
         runs +
         " (\n"
         "  id          INTEGER PRIMARY KEY AUTOINCREMENT,\n"
         "  name        TEXT    NOT NULL,\n"
         "  token       INTEGER NOT NULL,\n"
         "  owner       TEXT,\n"
         "  host        TEXT,\n"
         "  pid         INTEGER,\n"
         "  strategy    TEXT,\n"
         "  started_at  TEXT,\n"
         "  finished_at TEXT,\n"
         "  outcome     TEXT    NOT NULL,\n"
         "  exit_code   INTEGER\n"
         ");\n";
}

std::string index_sql(const std::string& prefix) {
  return "CREATE INDEX IF NOT EXISTS " + quote_ident(prefix + "runs_name_id") + " ON " +
         quote_ident(prefix + "runs") + " (name, id);\n";
}

}  // namespace

std::string schema_sql(const std::string& prefix) { return tables_sql(prefix) + index_sql(prefix); }

Result<void> ensure_schema(const Connection& conn, const std::string& prefix) {
  auto complete = schema_complete(conn, prefix);
  if (!complete) return std::unexpected(complete.error());
  if (*complete) return {};
  // One write transaction: one commit (one fsync) on a new file, and a table of the wrong
  // shape leaves nothing behind.
  auto tx = Transaction::begin_immediate(conn, "creating the tables");
  if (!tx) return std::unexpected(tx.error());
  if (auto ok = conn.exec(tables_sql(prefix), "creating the tables"); !ok) return ok;
  if (auto ok = check_table(conn, prefix + "locks", rows::locks_columns, true); !ok) return ok;
  if (auto ok = add_missing_columns(conn, prefix + "locks"); !ok) return ok;
  if (auto ok = check_table(conn, prefix + "runs", rows::runs_columns, false); !ok) return ok;
  // The index only after the shape check, so a foreign table gives the config error instead.
  if (auto ok = conn.exec(index_sql(prefix), "creating the history index"); !ok) return ok;
  return tx->commit("creating the tables");
}

Result<void> check_schema(const Connection& conn, const std::string& prefix) {
  auto locks = read_shape(conn, prefix + "locks");
  if (!locks) return std::unexpected(locks.error());
  auto runs = read_shape(conn, prefix + "runs");
  if (!runs) return std::unexpected(runs.error());
  if (locks->empty() || runs->empty()) return no_lock_database(conn.path());
  if (auto ok = check_table(conn, prefix + "locks", rows::locks_columns, true); !ok) return ok;
  if (auto ok = check_table(conn, prefix + "runs", rows::runs_columns, false); !ok) return ok;
  if (!has_boot_columns(*locks))
    return fail(ErrorKind::config, "table " + prefix + "locks in " + conn.path() +
                                       " was made by an older dblock and lacks the boot_* columns; the next "
                                       "`dblock run` or `dblock init` adds them");
  return {};
}

Result<bool> lacks_boot_columns(const Connection& conn, const std::string& prefix) {
  auto locks = read_shape(conn, prefix + "locks");
  if (!locks) return std::unexpected(locks.error());
  return !locks->empty() && !has_boot_columns(*locks);
}

Result<bool> has_slots_column(const Connection& conn, const std::string& prefix) {
  auto locks = read_shape(conn, prefix + "locks");
  if (!locks) return std::unexpected(locks.error());
  return has_column(*locks, slots_column.name);
}

std::string locks_without_boot_columns(const std::string& prefix) {
  std::string source = "(SELECT *";
  for (const auto& column : boot_columns) source += ", NULL AS " + std::string(column.name);
  return source + " FROM " + quote_ident(prefix + "locks") + ")";
}

Result<bool> repair_schema(const Connection& conn, const std::string& prefix, const Error& failed) {
  // SQLite reports a missing table or column as plain SQLITE_ERROR, the code of many other
  // mistakes too; the schema itself, read only on this error path, tells them apart.
  if ((failed.native_code & 0xff) != SQLITE_ERROR) return false;
  auto complete = schema_complete(conn, prefix);
  if (!complete) return std::unexpected(complete.error());
  // Complete now: another process may have made it since the statement failed, so the caller's
  // one more attempt tells (a mistake of another kind fails it again, the same way).
  if (*complete) return true;
  if (auto ok = ensure_schema(conn, prefix); !ok) return std::unexpected(ok.error());
  return true;
}

std::string now_ms_sql() { return epoch_ms_sql(now_sql()); }

std::string boot_judged_sql(const std::string& a) {
  return "(" + a + "boot_token IS " + a + "token AND " + a + "boot_id IS NOT NULL AND dblock_boot_id() IS NOT NULL)";
}

std::string lease_live_sql(const std::string& a) {
  return "COALESCE(CASE WHEN " + boot_judged_sql(a) + " THEN " + a + "boot_id = dblock_boot_id() AND " + a +
         "boot_expires_ms > dblock_boot_ms() ELSE " + epoch_ms_sql(a + "expires_at") + " > " + now_ms_sql() +
         " END, 0)";
}

std::string renew_boot_sql(std::string_view ttl_param) {
  return "boot_started_ms = CASE WHEN " + boot_judged_sql("") +
         " AND boot_id = dblock_boot_id() THEN boot_started_ms END, boot_id = dblock_boot_id(),"
         " boot_token = token, boot_expires_ms = dblock_boot_ms() + " +
         std::string(ttl_param);
}

std::string status_select(const Tables& t, std::string_view extra) {
  std::string sql = "SELECT " + rows::status_select_list(&epoch_ms_of, now_sql()) + ", " + lease_live_sql("");
  if (!extra.empty()) sql += ", " + std::string(extra);
  return sql + " FROM " + t.locks;
}

}  // namespace dblock::sqlite

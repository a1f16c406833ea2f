#include "backends/sqlite/sqlite_schema.hpp"

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace dblock::sqlite_impl {
namespace {

// Timestamps are TEXT 'YYYY-MM-DD HH:MM:SS.SSS' in UTC, written by SQLite's own clock, so a
// DBA can read them and they sort as they compare.
constexpr std::array<std::string_view, 14> locks_columns{
    "name", "owner", "host", "pid", "token", "strategy", "session_id", "acquired_at", "renewed_at",
    "expires_at", "released_at", "last_started_at", "last_finished_at", "last_exit_code"};
constexpr std::array<std::string_view, 11> runs_columns{
    "id", "name", "token", "owner", "host", "pid", "strategy", "started_at", "finished_at", "outcome", "exit_code"};

Result<void> check_table(const Connection& conn, const std::string& table, std::span<const std::string_view> wanted,
                         bool name_is_key) {
  auto stmt = conn.prepare("SELECT name, pk FROM pragma_table_info(?1)");
  if (!stmt) return std::unexpected(stmt.error());
  stmt->bind(1, std::string_view(table));
  std::vector<std::pair<std::string, std::int64_t>> found;
  for (;;) {
    auto row = stmt->step("reading the shape of table " + table);
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    found.emplace_back(stmt->text(0), stmt->int64(1));
  }
  for (std::string_view column : wanted) {
    bool present = false;
    for (const auto& [name, pk] : found) present = present || name == column;
    if (!present)
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
         "  last_exit_code   INTEGER\n"
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
  if (auto ok = conn.exec(tables_sql(prefix), "creating the tables"); !ok) return ok;
  if (auto ok = check_table(conn, prefix + "locks", locks_columns, true); !ok) return ok;
  if (auto ok = check_table(conn, prefix + "runs", runs_columns, false); !ok) return ok;
  // The index only after the shape check, so a foreign table gives the config error instead.
  return conn.exec(index_sql(prefix), "creating the history index");
}

}  // namespace dblock::sqlite_impl

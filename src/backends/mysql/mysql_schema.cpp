// Tables, DDL and the shared statements on <prefix>locks / <prefix>runs.
#include <algorithm>
#include <charconv>
#include <map>

#include "backends/common/identifiers.hpp"
#include "backends/mysql/mysql_tables.hpp"

namespace dblock::mysql {
namespace {

std::int64_t to_i64(const Value& v) {
  std::int64_t out = 0;
  if (v) std::from_chars(v->data(), v->data() + v->size(), out);
  return out;
}
std::optional<std::int64_t> to_opt_i64(const Value& v) {
  if (!v) return std::nullopt;
  return to_i64(v);
}

// The columns each table must have (dblock(1) TABLES, src/backends/README.md).
const std::map<std::string, std::vector<std::string>>& required_columns() {
  static const std::map<std::string, std::vector<std::string>> columns{
      {"locks",
       {"name", "owner", "host", "pid", "token", "strategy", "session_id", "acquired_at", "renewed_at", "expires_at",
        "released_at", "last_started_at", "last_finished_at", "last_exit_code"}},
      {"runs",
       {"id", "name", "token", "owner", "host", "pid", "strategy", "started_at", "finished_at", "outcome",
        "exit_code"}},
      {"claims", {"name", "kind"}},
  };
  return columns;
}

// Binds the prefix (for the advisory lock name).
Sql status_columns(const Tables& t) {
  // alive: does the server say the recorded session still holds the lock? GET_LOCK is visible
  // to every session through IS_USED_LOCK; a transaction's lock only through its connection.
  const std::string session = "CAST(session_id AS UNSIGNED)";
  const std::string connected =
      "EXISTS (SELECT 1 FROM information_schema.PROCESSLIST p WHERE p.ID = " + session + ")";
  Sql columns("name, owner, host, pid, token, strategy, " + epoch_ms("acquired_at") + ", " + epoch_ms("renewed_at") +
              ", " + epoch_ms("expires_at") + ", " + epoch_ms("released_at") + ", " + epoch_ms("last_started_at") +
              ", " + epoch_ms("last_finished_at") + ", last_exit_code, " + epoch_ms("NOW(6)") +
              ", CASE strategy WHEN 'advisory' THEN COALESCE(IS_USED_LOCK(");
  columns.add(advisory_name_of_column(t, "name"));
  columns.add(") = " + session + ", 0) WHEN 'for-update' THEN " + connected + " WHEN 'txn-insert' THEN " + connected +
              " ELSE NULL END, expires_at > NOW(6)");
  return columns;
}

LockStatus to_status(const Row& r) {
  LockStatus s;
  s.key = r[0].value_or("");
  s.owner = r[1].value_or("");
  s.host = r[2].value_or("");
  s.pid = to_i64(r[3]);
  s.token = to_i64(r[4]);
  s.strategy = r[5].value_or("");
  s.acquired_at_ms = to_opt_i64(r[6]);
  s.renewed_at_ms = to_opt_i64(r[7]);
  s.expires_at_ms = to_opt_i64(r[8]);
  s.released_at_ms = to_opt_i64(r[9]);
  s.last_started_at_ms = to_opt_i64(r[10]);
  s.last_finished_at_ms = to_opt_i64(r[11]);
  if (r[12]) s.last_exit_code = static_cast<int>(to_i64(r[12]));
  s.db_now_ms = to_i64(r[13]);
  const bool alive = to_i64(r[14]) == 1;
  const bool unexpired = to_i64(r[15]) == 1;
  const bool released =
      s.released_at_ms && (!s.acquired_at_ms || *s.released_at_ms >= *s.acquired_at_ms);
  const bool session = s.strategy == "advisory" || s.strategy == "for-update" || s.strategy == "txn-insert";
  if (session) {
    s.state = (!released && alive) ? LockStatus::State::held : LockStatus::State::free;
    s.expires_at_ms.reset();
  } else if (s.acquired_at_ms && unexpired) {
    s.state = LockStatus::State::held;
  } else if (!s.acquired_at_ms || released) {
    s.state = LockStatus::State::free;
  } else {
    s.state = LockStatus::State::expired;
  }
  return s;
}

}  // namespace

Tables make_tables(const std::string& prefix) {
  return Tables{prefix, quote_identifier(prefix + "locks", '`'), quote_identifier(prefix + "runs", '`'),
                quote_identifier(prefix + "claims", '`')};
}

std::vector<std::string> schema_statements(const std::string& prefix) {
  const Tables t = make_tables(prefix);
  // name is VARBINARY: compared byte-wise, and 255 bytes of any UTF-8 fit.
  // DATETIME(6) holds UTC (every dblock session runs with time_zone '+00:00').
  const std::string options = " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";
  return {
      "CREATE TABLE IF NOT EXISTS " + t.locks +
          " (\n"
          "  name VARBINARY(255) NOT NULL PRIMARY KEY,\n"
          "  owner VARCHAR(255) NULL,\n"
          "  host VARCHAR(255) NULL,\n"
          "  pid BIGINT NULL,\n"
          "  token BIGINT NOT NULL DEFAULT 0,\n"
          "  strategy VARCHAR(16) NULL,\n"
          "  session_id VARCHAR(64) NULL,\n"
          "  acquired_at DATETIME(6) NULL,\n"
          "  renewed_at DATETIME(6) NULL,\n"
          "  expires_at DATETIME(6) NULL,\n"
          "  released_at DATETIME(6) NULL,\n"
          "  last_started_at DATETIME(6) NULL,\n"
          "  last_finished_at DATETIME(6) NULL,\n"
          "  last_exit_code INT NULL\n"
          ")" + options,
      "CREATE TABLE IF NOT EXISTS " + t.runs +
          " (\n"
          "  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,\n"
          "  name VARBINARY(255) NOT NULL,\n"
          "  token BIGINT NOT NULL,\n"
          "  owner VARCHAR(255) NULL,\n"
          "  host VARCHAR(255) NULL,\n"
          "  pid BIGINT NULL,\n"
          "  strategy VARCHAR(16) NULL,\n"
          "  started_at DATETIME(6) NULL,\n"
          "  finished_at DATETIME(6) NULL,\n"
          "  outcome VARCHAR(16) NOT NULL,\n"
          "  exit_code INT NULL,\n"
          "  KEY " + quote_identifier(prefix + "runs_name_id", '`') + " (name, id)\n"
          ")" + options,
      "CREATE TABLE IF NOT EXISTS " + t.claims +
          " (\n"
          "  name VARBINARY(255) NOT NULL,\n"
          "  kind VARCHAR(16) NOT NULL,\n"
          "  PRIMARY KEY (name, kind)\n"
          ")" + options,
  };
}

namespace {

// Every table's columns in one round trip: table name -> lower-case column names.
Result<std::map<std::string, std::vector<std::string>>> read_columns(Connection& conn, const Tables& t) {
  const std::string locks = t.prefix + "locks", runs = t.prefix + "runs", claims = t.prefix + "claims";
  auto rows = conn.execute(Sql("SELECT TABLE_NAME, LOWER(COLUMN_NAME) FROM information_schema.COLUMNS "
                               "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN (?, ?, ?)",
                               locks, runs, claims));
  if (!rows) return std::unexpected(rows.error());
  std::map<std::string, std::vector<std::string>> columns;
  for (const auto& row : rows->rows) columns[row[0].value_or("")].push_back(row[1].value_or(""));
  return columns;
}

}  // namespace

Result<void> ensure_schema(Connection& conn, const Tables& t) {
  // The common case, tables already there, costs one query; DDL runs only when one is missing
  // (CREATE TABLE IF NOT EXISTS on every run was three statements per `dblock run`).
  auto columns = read_columns(conn, t);
  if (!columns) return std::unexpected(columns.error());
  if (columns->size() < required_columns().size()) {
    for (const auto& ddl : schema_statements(t.prefix))
      if (auto r = conn.query(ddl); !r) return r;
    columns = read_columns(conn, t);
    if (!columns) return std::unexpected(columns.error());
  }
  for (const auto& [suffix, required] : required_columns()) {
    const std::string table = t.prefix + suffix;
    const auto& present = (*columns)[table];
    for (const auto& column : required) {
      if (std::find(present.begin(), present.end(), column) == present.end())
        return fail(ErrorKind::config, "table " + table + " in " + conn.where() + " has no column '" + column +
                                           "' (an unexpected shape; see `dblock schema --dialect mysql`)");
    }
  }
  return {};
}

std::string epoch_ms(const std::string& expr) {
  return "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', " + expr + ") DIV 1000)";
}

Sql due_condition(std::int64_t min_interval_us) {
  return Sql("(? = 0 OR last_started_at IS NULL OR last_started_at <= NOW(6) - INTERVAL ? MICROSECOND)",
             min_interval_us, min_interval_us);
}

Sql advisory_name_of_column(const Tables& t, const std::string& key_column) {
  // All parts as bytes: a key's UTF-8 must not meet the database name's collation.
  return Sql("CONCAT('dblock:', LEFT(SHA2(CONCAT(CAST(DATABASE() AS BINARY), 0x00, CAST(? AS BINARY), 0x00, CAST(" +
                 key_column + " AS BINARY)), 256), 57))",
             t.prefix);
}

Sql advisory_name(const Tables& t, std::string_view key) {
  return Sql("CONCAT('dblock:', LEFT(SHA2(CONCAT(CAST(DATABASE() AS BINARY), 0x00, CAST(? AS BINARY), 0x00, "
             "CAST(? AS BINARY)), 256), 57))",
             t.prefix, key);
}

Result<std::optional<LockStatus>> read_lock(Connection& conn, const Tables& t, const std::string& key) {
  auto rows = conn.execute(Sql("SELECT ").add(status_columns(t)).add(" FROM " + t.locks + " WHERE name = ?", key));
  if (!rows) return std::unexpected(rows.error());
  if (rows->rows.empty()) return std::optional<LockStatus>();
  return std::optional<LockStatus>(to_status(rows->rows.front()));
}

Result<std::vector<LockStatus>> read_locks(Connection& conn, const Tables& t, std::span<const std::string> keys) {
  Sql sql("SELECT ");
  sql.add(status_columns(t)).add(" FROM " + t.locks);
  if (!keys.empty()) {
    sql.add(" WHERE name IN (");
    for (std::size_t i = 0; i < keys.size(); ++i) sql.add(i ? ", ?" : "?", keys[i]);
    sql.add(")");
  }
  sql.add(" ORDER BY name");
  auto rows = conn.execute(sql);
  if (!rows) return std::unexpected(rows.error());
  std::vector<LockStatus> found;
  for (const auto& row : rows->rows) found.push_back(to_status(row));
  if (keys.empty()) return found;

  std::vector<LockStatus> out;
  std::int64_t now = found.empty() ? 0 : found.front().db_now_ms;
  for (const auto& key : keys) {
    auto it = std::ranges::find(found, key, &LockStatus::key);
    if (it != found.end()) {
      out.push_back(*it);
      continue;
    }
    if (now == 0) {
      auto r = conn.execute("SELECT " + epoch_ms("NOW(6)"));
      if (!r) return std::unexpected(r.error());
      now = to_i64(r->rows.at(0).at(0));
    }
    LockStatus free;
    free.key = key;
    free.db_now_ms = now;
    out.push_back(std::move(free));
  }
  return out;
}

Result<void> write_history(Connection& conn, const Tables& t, const RunRecord& run, int keep) {
  const auto outcome = to_string(run.outcome);
  Sql insert("INSERT INTO " + t.runs +
             " (name, token, owner, host, pid, strategy, started_at, finished_at, outcome, exit_code) ");
  insert.add("SELECT ?, ?, ?, ?, ?, ?, ", run.key, run.token, run.owner, run.host, run.pid, run.strategy);
  insert.add("COALESCE((SELECT acquired_at FROM " + t.locks + " WHERE name = ? AND token = ?), NOW(6)), NOW(6), ",
             run.key, run.token);
  insert.add("?, ?", outcome, run.exit_code);
  auto inserted = conn.execute(insert);
  if (!inserted) return std::unexpected(inserted.error());
  // The derived table lets MySQL read the table it deletes from.
  Sql prune("DELETE FROM " + t.runs + " WHERE name = ?", run.key);
  prune.add(" AND id <= (SELECT id FROM (SELECT id FROM " + t.runs + " WHERE name = ? ORDER BY id DESC LIMIT 1 OFFSET ?) AS cutoff)",
            run.key, keep);
  auto pruned = conn.execute(prune);
  if (!pruned) return std::unexpected(pruned.error());
  return {};
}

Result<Millis> due_in(Connection& conn, const Tables& t, const std::string& key, Millis min_interval) {
  Sql sql("SELECT GREATEST(0, " + epoch_ms("last_started_at + INTERVAL ? MICROSECOND") + " - " + epoch_ms("NOW(6)") + ")",
          micros(min_interval));
  auto rows = conn.execute(sql.add(" FROM " + t.locks + " WHERE name = ?", key));
  if (!rows) return std::unexpected(rows.error());
  if (rows->rows.empty() || !rows->rows.front()[0]) return Millis(0);
  return Millis(to_i64(rows->rows.front()[0]));
}

}  // namespace dblock::mysql

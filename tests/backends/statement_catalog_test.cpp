// `dblock schema --statements` (dblock(1)): every statement of every dialect, each readable by a
// DBA, with nothing but whitespace changed by the layout.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "backends/mysql/mysql_tables.hpp"
#include "backends/postgres/postgres_tables.hpp"
#include "backends/registry.hpp"
#include "backends/sqlite/sqlite_tables.hpp"
#include "core/sql/statement_catalog.hpp"

using namespace dblock;

namespace {

constexpr int width = 101;  // dblock schema --statements's (format_sql's default)

std::string without_whitespace(const std::string& text) {
  std::string out;
  for (char c : text)
    if (c != ' ' && c != '\n') out += c;
  return out;
}

// The line without its string literals' text (a literal cannot be broken).
std::string without_literals(const std::string& line) {
  std::string out;
  bool quoted = false;
  for (char c : line) {
    if (c == '\'') quoted = !quoted;
    if (!quoted && c != '\'') out += c;
  }
  return out;
}

std::vector<std::string> ids_of(const std::vector<sql::Statement>& list) {
  std::vector<std::string> ids;
  for (const auto& st : list) ids.push_back(st.id);
  return ids;
}

// The ids of the statements `dblock schema --statements --dialect name` prints.
std::vector<std::string> printed(std::string_view name, const BackendOptions& options) {
  return ids_of(load_backend(name).value()->statements(options));
}

bool listed(const std::vector<std::string>& ids, const std::string& id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// Every statement a dialect's statement sets hold is in its catalog.
void check_complete(const std::vector<std::string>& ids, const sql::LeaseStatements& lease,
                    const sql::InspectStatements& inspect, const sql::ShedlockStatements& shedlock) {
  for (const sql::Statement* st : {&lease.take, &lease.taken, &lease.session_take, &lease.refusal, &lease.renew,
                                   &lease.release, &lease.history.add, &lease.history.oldest, &lease.history.trim,
                                   &lease.header_take, &lease.header_refusal, &lease.lock_row, &lease.failover.read,
                                   &inspect.status_all, &inspect.history_of, &inspect.renew_named, &inspect.renewed,
                                   &shedlock.take, &shedlock.number, &shedlock.extend, &shedlock.unlock}) {
    CAPTURE(st->id);
    CHECK(st->empty() != listed(ids, st->id));
  }
}

}  // namespace

TEST_CASE("schema --statements lists every statement of each dialect, each named once") {
  BackendOptions options;
  for (const KnownBackend& known : known_backends()) {
    CAPTURE(known.name);
    const auto list = load_backend(known.name).value()->statements(options);
    const auto ids = ids_of(list);
    CHECK(std::set<std::string>(ids.begin(), ids.end()).size() == ids.size());
    for (const char* id : {"lease.take", "lease.release", "history.add", "history.oldest", "history.trim",
                           "inspect.status_all", "shedlock.take", "schema.columns"})
      CHECK(listed(ids, id));
    for (const auto& st : list) {
      CAPTURE(st.id);
      CHECK_FALSE(st.text.empty());
    }
  }
  BackendOptions shed = options;
  shed.shedlock = true;
  check_complete(printed("sqlite", options), sqlite::lease_statements("dblock_"),
                 sqlite::inspect_statements(options), sqlite::shedlock_statements(shed));
  check_complete(printed("mysql", options), mysql::lease_statements("dblock_", false),
                 mysql::inspect_statements(options), mysql::shedlock_statements(shed));
  check_complete(printed("postgres", options), postgres::lease_statements("dblock_"),
                 postgres::inspect_statements(options), postgres::shedlock_statements(shed));
  // The variants whose text differs are there too, named as such.
  const auto mysql_ids = printed("mysql", options);
  CHECK(listed(mysql_ids, "failover.read (MariaDB)"));
  CHECK(listed(mysql_ids, "inspect.status_all (--table-format shedlock)"));
  CHECK(listed(mysql_ids, "lock.advisory_wait"));
  CHECK(listed(mysql_ids, "lock.advisory_release_row"));
  CHECK(listed(printed("postgres", options), "lock.advisory_numbered_wait"));
  // The row-lock numbering gate, which the holder sessions run (core's, over the session lock):
  // PostgreSQL's, and MariaDB's (its numbering is MariaDB's alone: listed by its own name).
  const sql::LockStatements pg_lock = postgres::lock_statements("dblock_");
  for (const sql::Statement* st : {&pg_lock.gate_take, &pg_lock.gate_wait, &pg_lock.gate_give}) {
    CAPTURE(st->id);
    CHECK_FALSE(st->empty());
    CHECK(listed(printed("postgres", options), st->id));
  }
  const sql::LockStatements maria_lock = mysql::lock_statements("dblock_", true);
  for (const sql::Statement* st : {&maria_lock.gate_take, &maria_lock.gate_wait, &maria_lock.gate_give}) {
    CAPTURE(st->id);
    CHECK_FALSE(st->empty());
    CHECK(listed(mysql_ids, st->id));
  }
  CHECK(mysql::lock_statements("dblock_", false).gate_take.empty());
}

TEST_CASE("each statement is laid out one clause per line, within the width, and otherwise unchanged") {
  BackendOptions options;
  for (const KnownBackend& known : known_backends()) {
    CAPTURE(known.name);
    for (const auto& st : load_backend(known.name).value()->statements(options)) {
      CAPTURE(st.id);
      const std::string text = sql::format_sql(st.text);
      CHECK(without_whitespace(text) == without_whitespace(st.text));
      std::size_t begin = 0;
      while (begin <= text.size()) {
        std::size_t end = text.find('\n', begin);
        if (end == std::string::npos) end = text.size();
        const std::string line = text.substr(begin, end - begin);
        CAPTURE(line);
        // The last with room for its ";".
        CHECK(without_literals(line).size() + (end == text.size() ? 1 : 0) <= width);
        begin = end + 1;
      }
    }
  }
}

TEST_CASE("format_sql breaks before each clause and indents a subquery that does not fit") {
  CHECK(sql::format_sql("SELECT a, b FROM t WHERE x = 1 AND y = 'a  b' ORDER BY a") ==
        "SELECT a, b\nFROM t\nWHERE x = 1 AND y = 'a  b'\nORDER BY a");
  CHECK(sql::format_sql("INSERT INTO t (a) VALUES (1) ON CONFLICT (a) DO UPDATE SET a = excluded.a RETURNING a") ==
        "INSERT INTO t (a)\nVALUES (1)\nON CONFLICT (a) DO UPDATE\nSET a = excluded.a\nRETURNING a");
  const std::string cond(40, 'c');
  CHECK(sql::format_sql("DELETE FROM t WHERE id <= (SELECT id FROM t WHERE " + cond + " = 1 AND " + cond + " = 2)", 60) ==
        "DELETE FROM t\nWHERE id <= (\n  SELECT id\n  FROM t\n  WHERE " + cond + " = 1\n    AND " + cond + " = 2)");
  // A CASE that fits a line stays whole when its clause is broken (a reader takes it in at once);
  // one that does not is broken before its THEN and ELSE, and before its first WHEN only when that
  // does not fit the CASE's line whole.
  const std::string col(30, 'x');
  const std::string c(6, 'c');
  CHECK(sql::format_sql("UPDATE t SET " + c + " = CASE WHEN :f = 1 THEN now() ELSE " + c + " END, " + col + " = 2 WHERE a = 1", 60) ==
        "UPDATE t\nSET " + c + " = CASE WHEN :f = 1 THEN now() ELSE " + c + " END,\n  " + col + " = 2\nWHERE a = 1");
  CHECK(sql::format_sql("UPDATE t SET b = CASE WHEN " + col + " = 1 THEN " + col + " ELSE 0 END WHERE a = 1", 60) ==
        "UPDATE t\nSET b = CASE WHEN " + col + " = 1\n  THEN " + col + "\n  ELSE 0 END\nWHERE a = 1");
  CHECK(sql::format_sql("UPDATE t SET b = CASE WHEN " + col + " = 1 AND " + col + " = 2 THEN 1 ELSE 0 END", 60) ==
        "UPDATE t\nSET b = CASE\n  WHEN " + col + " = 1\n  AND " + col + " = 2\n  THEN 1\n  ELSE 0 END");
  // List items of at most half a line share a line, after an item that was on one line, and so
  // does an item after a short one that began its line, long or not, where it fits; the operands
  // of || share lines too.
  const std::string item(20, 'i'), wide(50, 'w');
  CHECK(sql::format_sql("SELECT " + item + ", " + wide + ", " + item + ", a FROM t", 80) ==
        "SELECT " + item + ", " + wide + ",\n  " + item + ", a\nFROM t");
  CHECK(sql::format_sql("SELECT " + item + ", " + wide + ", " + wide + " FROM t", 80) ==
        "SELECT " + item + ", " + wide + ",\n  " + wide + "\nFROM t");
  CHECK(sql::format_sql("SELECT " + wide + ", " + wide + ", " + item + " FROM t", 80) ==
        "SELECT " + wide + ",\n  " + wide + ", " + item + "\nFROM t");
  CHECK(sql::format_sql("SELECT " + wide + ", " + item + ", " + col + " FROM t", 60) ==
        "SELECT " + wide + ",\n  " + item + ", " + col + "\nFROM t");
  CHECK(sql::format_sql("SELECT " + col + " || " + c + " || " + col + " FROM t", 60) ==
        "SELECT " + col + " || " + c + "\n  || " + col + "\nFROM t");
  // A broken group starts on its parenthesis's line when each of its parts fits a line there
  // (none of them broken in turn), and a WHEN that fits its line keeps its ANDs.
  CHECK(sql::format_sql("SELECT f(" + col + ", " + col + ") FROM t", 60) ==
        "SELECT f(" + col + ",\n  " + col + ")\nFROM t");
  CHECK(sql::format_sql("SELECT CASE WHEN a = 1 AND b = 2 THEN " + col + " ELSE " + col + " END FROM t", 60) ==
        "SELECT CASE WHEN a = 1 AND b = 2\n  THEN " + col + "\n  ELSE " + col + " END\nFROM t");
  // Unbalanced parentheses (never a statement of dblock's): left as written.
  CHECK(sql::format_sql("SELECT (1") == "SELECT (1");
}

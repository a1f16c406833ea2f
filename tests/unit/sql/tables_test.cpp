// dblock's tables described once (src/core/sql/tables.hpp), rendered for a dialect without a
// database: the CREATEs, the ALTERs of the columns added since, and the reads of a table of an
// older shape.

#include <doctest/doctest.h>

#include <string>

#include "core/backend.hpp"
#include "core/sql/lock_rows.hpp"
#include "core/sql/statements.hpp"
#include "core/sql/tables.hpp"

using namespace dblock;
using sql::tables::Type;

namespace {

constexpr sql::tables::Column own[] = {
    {.name = "own_a", .type = Type::int64, .since = sql::tables::own_lease_shape},
    {.name = "own_b", .type = Type::text, .since = sql::tables::own_lease_shape},
};

// A dialect whose types are their enum names and which keeps a lease of its own.
sql::tables::SchemaDialect test_dialect(bool sessions) {
  return {
      .quote = '"',
      .type = [](Type t) -> std::string {
        switch (t) {
          case Type::name: return "NAME";
          case Type::text: return "TEXT";
          case Type::word: return "WORD";
          case Type::session: return "SESSION";
          case Type::int64: return "INT64";
          case Type::int32: return "INT32";
          case Type::timestamp: return "TIME";
          case Type::id: break;
        }
        return "?";
      },
      .identity = "ID PRIMARY KEY",
      .name_check = [](std::string_view c) { return "CHECK (len(" + std::string(c) + "))"; },
      .table_options = " OPTIONS",
      .index = [](std::string_view name, std::string_view table, std::string_view columns) {
        return "CREATE INDEX " + std::string(name) + " ON " + std::string(table) + " (" + std::string(columns) + ")";
      },
      .add_column = "ADD",
      .own_columns = sessions ? std::span<const sql::tables::Column>() : std::span<const sql::tables::Column>(own),
  };
}

constexpr Strategy lease_only[] = {Strategy::lease};
constexpr Strategy every_strategy[] = {Strategy::lease, Strategy::advisory, Strategy::for_update, Strategy::txn_insert};

BackendOptions prefixed(std::string prefix) {
  BackendOptions o;
  o.table_prefix = std::move(prefix);
  return o;
}

}  // namespace

TEST_CASE("status and history read the described columns, in their order") {
  CHECK(sql::tables::status_index("name") == 0);
  CHECK(sql::tables::status_index("strategy") == 5);
  CHECK(sql::tables::status_index("acquired_at") == 6);  // session_id is not read
  CHECK(sql::tables::status_index("last_exit_code") == 12);
  CHECK(rows::status_column_count == 14);
  CHECK(sql::tables::run_index("exit_code") == 10);
}

TEST_CASE("each table's CREATE, its index, and the ALTER of each added column, from the description") {
  const auto sd = test_dialect(false);
  const sql::SchemaStatements s = sql::tables::schema_statements(sd, prefixed("p_"), "test", lease_only);
  REQUIRE(s.create.size() == 3);  // locks, runs and its index; no claims without sessions
  CHECK(s.create[0].table == "p_locks");
  const std::string& locks = s.create[0].sql;
  CHECK(locks.starts_with("CREATE TABLE IF NOT EXISTS \"p_locks\" (\n"));
  CHECK(locks.find("  -- the key, byte for byte\n  name NAME NOT NULL PRIMARY KEY CHECK (len(name)),\n") !=
        std::string::npos);
  CHECK(locks.find("\n  token INT64 NOT NULL DEFAULT 0,\n") != std::string::npos);
  CHECK(locks.find("\n  owner TEXT,\n") != std::string::npos);
  // The dialect's own columns come before the later shape's slots, the last with no comma.
  CHECK(locks.find("own_a") < locks.find("slots"));
  CHECK(locks.ends_with("  -- a semaphore header row: its slot count (--slots)\n  slots INT32\n) OPTIONS"));
  CHECK(s.create[1].sql.find("  id ID PRIMARY KEY,") != std::string::npos);
  CHECK(s.create[2].sql == "CREATE INDEX \"p_runs_name_id\" ON \"p_runs\" (name, id)");
  CHECK(s.create[2].table == "p_runs");
  REQUIRE(s.added.size() == 3);
  CHECK(s.added[0].add == "ALTER TABLE \"p_locks\" ADD own_a INT64");
  CHECK(s.added[0].table == "p_locks");
  CHECK(s.added[0].described->required);
  CHECK(s.added[2].column == "slots");
  CHECK_FALSE(s.added[2].described->required);

  const sql::SchemaStatements server = sql::tables::schema_statements(test_dialect(true), prefixed("p_"), "test", every_strategy);
  REQUIRE(server.create.size() == 4);
  CHECK(server.create[3].sql.find("  PRIMARY KEY (name, kind)\n)") != std::string::npos);
  CHECK(server.added.size() == 1);
}

TEST_CASE("a table of an older shape is read with NULL for the required columns it lacks") {
  const auto sd = test_dialect(false);
  const auto shapes = sql::tables::older_shapes(sd);
  REQUIRE(shapes.size() == 1);  // slots is not required: only the own columns make a shape
  CHECK(shapes[0].before == sql::tables::own_lease_shape);
  REQUIRE(shapes[0].lacks.size() == 2);
  CHECK(shapes[0].lacks[0] == std::pair<std::string, std::string>("locks", "own_a"));
  const std::string read = sql::tables::read_as_before(sql::tables::locks, sd, "\"p_locks\"", shapes[0].before);
  CHECK(read.starts_with("(SELECT name, owner, "));
  CHECK(read.ends_with("last_exit_code, NULL AS own_a, NULL AS own_b FROM \"p_locks\")"));
  CHECK(read.find("slots") == std::string::npos);
  // A table that lacks nothing there is read as it is.
  CHECK(sql::tables::read_as_before(sql::tables::runs, sd, "\"p_runs\"", shapes[0].before) == "\"p_runs\"");
  CHECK(sql::tables::older_shapes(test_dialect(true)).empty());
}

TEST_CASE("an index: CREATE INDEX IF NOT EXISTS unless the dialect writes it inside its CREATE TABLE") {
  const sql::tables::SchemaDialect plain{.type = [](Type) { return std::string("T"); }, .identity = "ID"};
  const sql::SchemaStatements s = sql::tables::schema_statements(plain, prefixed("p_"), "test", lease_only);
  REQUIRE(s.create.size() == 3);
  CHECK(s.create[2].sql == "CREATE INDEX IF NOT EXISTS \"p_runs_name_id\" ON \"p_runs\" (name, id)");
  CHECK(s.added.back().add == "ALTER TABLE \"p_locks\" ADD COLUMN slots T");

  sql::tables::SchemaDialect inlined = plain;
  inlined.inline_index = [](std::string_view name, std::string_view columns) {
    return "KEY " + std::string(name) + " (" + std::string(columns) + ")";
  };
  const sql::SchemaStatements i = sql::tables::schema_statements(inlined, prefixed("p_"), "test", lease_only);
  REQUIRE(i.create.size() == 2);  // no CREATE INDEX of its own
  CHECK(i.create[1].sql.ends_with("  KEY \"p_runs_name_id\" (name, id)\n)"));
}

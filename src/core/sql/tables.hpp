#pragma once
// dblock's tables, described once (dblock(1) TABLES; docs/backend-contract.md, "Tables"): each
// table's columns with a portable type, its key and index, and the shape of the table each
// column came with. From this core renders every dialect's CREATE TABLE and the ALTER TABLE of
// each column added since (SchemaStatements::create, added), what ensure_schema and
// check_schema require (schema.cpp), the columns status and history read (lock_rows.hpp) and
// the reads of a table an older dblock made (InspectStatements::older). A dialect says only how
// it spells a type, its numbered id, an index and an added column (SchemaDialect).

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/lock_types.hpp"

namespace dblock {
struct BackendOptions;
}
namespace dblock::sql {
struct SchemaStatements;
}

namespace dblock::sql::tables {

/// A column's type, as every dialect can hold it.
enum class Type {
  name,       // a lock name: 1 to 255 bytes of any UTF-8, compared byte for byte
  text,       // up to 255 characters (an owner, a host)
  word,       // up to 16 characters (a strategy, a kind, an outcome)
  session,    // up to 64 characters (a server session's id)
  int64,
  int32,
  timestamp,  // UTC, in milliseconds at least
  id,         // a 64-bit id the database numbers: the table's primary key
};

/// The shapes of the tables, oldest first: each column names the one it came with, and a table an
/// older dblock made gets the later ones by ALTER TABLE (ensure_schema) or is read without them
/// (InspectStatements::older). A new column takes a new shape, after the last.
inline constexpr int first_shape = 0;
inline constexpr int own_lease_shape = 1;  // a dialect's own lease (SchemaDialect::own_columns)
inline constexpr int semaphore_shape = 2;  // slots (--slots)

struct Column {
  std::string_view name;
  Type type;
  bool not_null = false;
  std::string_view default_sql = {};
  int since = first_shape;
  /// An added column (since > first_shape) that only what uses it asks for (false: a
  /// semaphore's slots; plain keys work without it); the others check_schema asks for too.
  bool required = true;
  /// Read by status, in the order of the table (rows::status_select_list, decode_status).
  bool status = false;
  /// Of the row's last run or renewal, which status shows and nothing reads of a row that
  /// refused a take (rows::refusal_select_list: NULL in its place).
  bool past = false;
  /// The holder's: every take writes it from the bound parameter of its name (rules.hpp
  /// holder_values; rows::bind_holder binds it from the request), so a new one needs no
  /// statement edited.
  bool holder = false;
  /// For the DBA who reads the DDL: a line of its own above the column.
  std::string_view comment = {};
};

struct Table {
  std::string_view suffix;  // the name after the table prefix
  std::span<const Column> columns;
  /// The primary key, which the upserts meet a key's row on (check_schema asks for a unique key
  /// on exactly these). Empty: the table's Type::id column is its key.
  std::span<const std::string_view> key = {};
  /// A non-unique index on these columns, named the table's name + "_" + index_name.
  std::string_view index_name = {};
  std::span<const std::string_view> index = {};
  /// Made only where the backend has the session strategies (schema_statements).
  bool sessions_only = false;
  /// What `dblock schema` says above its DDL.
  std::string_view note = {};
};

inline constexpr Column locks_columns[] = {
    {.name = "name", .type = Type::name, .not_null = true, .status = true, .comment = "the key, byte for byte"},
    {.name = "owner", .type = Type::text, .status = true, .holder = true},
    {.name = "host", .type = Type::text, .status = true, .holder = true},
    {.name = "pid", .type = Type::int64, .status = true, .holder = true},
    {.name = "token",
     .type = Type::int64,
     .not_null = true,
     .default_sql = "0",
     .status = true,
     .comment = "fencing token, +1 per acquisition"},
    {.name = "strategy", .type = Type::word, .status = true},
    {.name = "session_id", .type = Type::session},
    {.name = "acquired_at", .type = Type::timestamp, .status = true},
    {.name = "renewed_at", .type = Type::timestamp, .status = true, .past = true},
    {.name = "expires_at", .type = Type::timestamp, .status = true},
    {.name = "released_at", .type = Type::timestamp, .status = true},
    {.name = "last_started_at", .type = Type::timestamp, .status = true},
    {.name = "last_finished_at", .type = Type::timestamp, .status = true, .past = true},
    {.name = "last_exit_code", .type = Type::int32, .status = true, .past = true},
    {.name = "slots",
     .type = Type::int32,
     .since = semaphore_shape,
     .required = false,
     .comment = "a semaphore header row: its slot count (--slots)"},
};
inline constexpr std::string_view locks_key[] = {"name"};

inline constexpr Column runs_columns[] = {
    {.name = "id", .type = Type::id},
    {.name = "name", .type = Type::name, .not_null = true},
    {.name = "token", .type = Type::int64, .not_null = true},
    {.name = "owner", .type = Type::text},
    {.name = "host", .type = Type::text},
    {.name = "pid", .type = Type::int64},
    {.name = "strategy", .type = Type::word},
    {.name = "started_at", .type = Type::timestamp},
    {.name = "finished_at", .type = Type::timestamp},
    {.name = "outcome", .type = Type::word, .not_null = true},
    {.name = "exit_code", .type = Type::int32},
};
inline constexpr std::string_view runs_index[] = {"name", "id"};

inline constexpr Column claims_columns[] = {
    {.name = "name", .type = Type::name, .not_null = true},
    {.name = "kind", .type = Type::word, .not_null = true},
};
inline constexpr std::string_view claims_key[] = {"name", "kind"};

inline constexpr Table locks{
    .suffix = "locks",
    .columns = locks_columns,
    .key = locks_key,
    .note = "one row per lock name, never deleted: the last holder, the fencing token, the lease and\n-- the run times."};
inline constexpr Table runs{
    .suffix = "runs",
    .columns = runs_columns,
    .index_name = "name_id",
    .index = runs_index,
    .note = "the history, one row per `dblock run`, kept to --history-keep per key. Its (name, id)\n-- index serves "
            "`dblock history KEY` and that trim."};
inline constexpr Table claims{
    .suffix = "claims",
    .columns = claims_columns,
    .key = claims_key,
    .sessions_only = true,
    .note = "the rows for-update and txn-insert lock (lease and advisory leave it empty)."};

/// dblock's tables, in the order they are made.
inline constexpr std::array<const Table*, 3> all{&locks, &runs, &claims};

/// The index of `column` among the columns status reads (rows::status_select_list).
consteval int status_index(std::string_view column) {
  int i = 0;
  for (const Column& c : locks_columns) {
    if (!c.status) continue;
    if (c.name == column) return i;
    ++i;
  }
  throw "not a status column";
}
/// How many columns status reads.
consteval int status_columns() {
  int n = 0;
  for (const Column& c : locks_columns) n += c.status ? 1 : 0;
  return n;
}
/// The index of `column` among <prefix>runs's, which history reads (rows::history_select_list).
consteval int run_index(std::string_view column) {
  int i = 0;
  for (const Column& c : runs_columns) {
    if (c.name == column) return i;
    ++i;
  }
  throw "not a column of runs";
}

/// How a dialect spells the DDL of the description above. Each function returns SQL; where the
/// dialect has none of a thing it returns "" and core writes nothing of it.
struct SchemaDialect {
  /// The identifier quote.
  char quote = '"';
  /// The type of a column of type `t` (never Type::id).
  std::string (*type)(Type t) = nullptr;
  /// A Type::id column after its name: its type, how it is numbered, PRIMARY KEY. Default:
  /// SQL's GENERATED BY DEFAULT AS IDENTITY over the type of Type::int64.
  std::string identity = {};
  /// After the type of a Type::name column that is its table's whole key: "" or a CHECK of its
  /// 1 to 255 bytes, where the type does not bound it.
  std::string (*name_check)(std::string_view column) = [](std::string_view) { return std::string(); };
  /// A comment on the first column of type `t` in a table, when it has none of its own: how the
  /// dialect stores that type, where a DBA could not tell ("": none).
  std::string (*type_comment)(Type t) = [](Type) { return std::string(); };
  /// After a CREATE TABLE's closing parenthesis.
  std::string table_options = {};
  /// A non-unique index `name` (quoted) on `columns` (a list) of `table` (quoted): a line of its
  /// CREATE TABLE (`inline_index`, where CREATE INDEX has no IF NOT EXISTS; default "": none), or
  /// else a statement of its own (`index`; default CREATE INDEX IF NOT EXISTS).
  std::string (*inline_index)(std::string_view name, std::string_view columns) = [](std::string_view, std::string_view) {
    return std::string();
  };
  std::string (*index)(std::string_view name, std::string_view table, std::string_view columns) =
      [](std::string_view name, std::string_view table, std::string_view columns) {
        return "CREATE INDEX IF NOT EXISTS " + std::string(name) + " ON " + std::string(table) + " (" +
               std::string(columns) + ")";
      };
  /// ALTER TABLE's words before an added column's definition: "ADD COLUMN", or with IF NOT
  /// EXISTS where the dialect has it (`dblock schema` then prints it as a statement).
  std::string add_column = "ADD COLUMN";
  /// <prefix>locks columns the dialect keeps of its own (a lease on a clock of its own,
  /// rules.hpp OwnLease), each with its shape.
  std::span<const Column> own_columns = {};
};

/// Every column of `table` in dialect `d`: the table's and, for <prefix>locks, the dialect's own,
/// in the order of their shapes.
std::vector<Column> columns_of(const Table& table, const SchemaDialect& d);

/// The tables and added columns of `d` (SchemaStatements::create, added: each CREATE TABLE
/// whole, with its index, and each column since the first shape with its ALTER TABLE), over the
/// table names of `options`; the dialect adds the rest of SchemaStatements. The session
/// strategies' tables (Table::sessions_only) only where `strategies` (the backend's descriptor's)
/// has a session strategy.
SchemaStatements schema_statements(const SchemaDialect& d, const BackendOptions& options, std::string_view dialect_name,
                                   std::span<const Strategy> strategies);

/// An older shape of dblock's tables that inspection reads (InspectStatements::older): the
/// shapes before which a required column came, and the required columns a table of it lacks,
/// (table suffix, column).
struct OlderShape {
  int before;
  std::vector<std::pair<std::string, std::string>> lacks;
};
/// Those of dialect `d`, newest first; none when no required column came after the first shape
/// (the columns that only what uses them asks for, a semaphore's slots, make none).
std::vector<OlderShape> older_shapes(const SchemaDialect& d);

/// `quoted`, the quoted name of `table`, as a table of the shape before `before` is read: a
/// derived table of the columns that shape has and NULL for each required one it lacks (those
/// only what uses them asks for are left out); `quoted` itself when it lacks none.
std::string read_as_before(const Table& table, const SchemaDialect& d, const std::string& quoted, int before);

}  // namespace dblock::sql::tables

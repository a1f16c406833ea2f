#pragma once
// dblock's tables, once for every dialect: what is missing is made (ensure_schema), what is
// there is checked against the row layer's required columns (lock_rows.hpp), and inspection
// only reads (check_schema). The dialect writes the DDL and the read of the columns
// (SchemaStatements, in its <name>_statements.cpp) and says which native codes mean "missing"
// (Session::schema_missing).

#include <map>
#include <set>
#include <string>
#include <string_view>

#include "core/sql/statements.hpp"

namespace dblock {

/// The error of inspecting a database that has no dblock tables (or, SQLite, no file):
/// "no lock database at WHERE (nothing has run here yet, ...)", ErrorKind::other (exit 69).
std::unexpected<Error> no_lock_database(std::string_view where);

}  // namespace dblock

namespace dblock::sql {

/// One table that exists, as SchemaStatements::columns reads it.
struct TableShape {
  struct Column {
    bool fits = true;  // its type can hold what dblock writes (only name and token are judged)
    std::string type;  // as the server spells it, for messages
  };
  std::map<std::string, Column> columns;
  /// Each unique key (primary key, unique index or constraint; not partial, no expression, no
  /// prefix) by its name: its columns.
  std::map<std::string, std::set<std::string>> keys;
};

/// The tables that exist: table -> its shape.
using Columns = std::map<std::string, TableShape>;

/// The columns of the session's tables (Session::schema), read only.
Result<Columns> read_columns(Session& session);

/// Creates what is missing and checks what is there: ErrorKind::config naming the table and
/// the column when a table has another shape (a column missing, `name` not unique by itself,
/// a key column of another type). Reads only when the schema is complete.
Result<void> ensure_schema(Session& session);

/// Read only (doctor): missing tables are no_lock_database; a foreign shape, or a table of an
/// older dblock without a column the strategies need, is ErrorKind::config.
Result<void> check_schema(Session& session);

/// The DDL as `dblock schema` prints it, each statement ended by ";\n".
std::string schema_sql(const SchemaStatements& st);

}  // namespace dblock::sql

#pragma once
// dblock's tables, once for every dialect: what is missing is made (ensure_schema), what is
// there is checked against the row layer's required columns (lock_rows.hpp), and inspection
// only reads (check_schema). The dialect writes the DDL and the read of the columns
// (SchemaStatements, in its <name>_statements.cpp) and says which native codes mean "missing"
// (Session::schema_missing).

#include <map>
#include <string>
#include <string_view>

#include "core/sql/statements.hpp"

namespace dblock {

/// The error of inspecting a database that has no dblock tables (or, SQLite, no file):
/// "no lock database at WHERE (nothing has run here yet, ...)", ErrorKind::other (exit 69).
std::unexpected<Error> no_lock_database(std::string_view where);

}  // namespace dblock

namespace dblock::sql {

/// The columns of the tables that exist: table -> column -> whether it is the primary key
/// (true also when the dialect does not say).
using Columns = std::map<std::string, std::map<std::string, bool>>;

/// The columns of the session's tables (Session::schema), read only.
Result<Columns> read_columns(Session& session);

/// Creates what is missing and checks what is there: ErrorKind::config naming the table and
/// the column when a table has another shape. Reads only when the schema is complete.
Result<void> ensure_schema(Session& session);

/// Read only (doctor): missing tables are no_lock_database; a foreign shape, or a table of an
/// older dblock without a column the strategies need, is ErrorKind::config.
Result<void> check_schema(Session& session);

/// The DDL as `dblock schema` prints it, each statement ended by ";\n".
std::string schema_sql(const SchemaStatements& st);

}  // namespace dblock::sql

#pragma once
// The SQLite dialect of the tables in src/backends/README.md: DDL and the shape check.

#include <string>

#include "backends/sqlite/sqlite_connection.hpp"

namespace dblock::sqlite {

/// The DDL `dblock schema --dialect sqlite` prints; ensure_schema runs the same text.
std::string schema_sql(const std::string& prefix);

/// Creates the tables if missing, then checks their shape: ErrorKind::config naming the
/// table and the missing column when a table exists with another shape.
Result<void> ensure_schema(const Connection& conn, const std::string& prefix);

}  // namespace dblock::sqlite

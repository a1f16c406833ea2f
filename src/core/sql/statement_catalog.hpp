#pragma once
// Every statement a dialect can run, named and laid out for a DBA to read
// (`dblock schema --statements`, dblock(1)). The dialect lists its statement sets; the catalog
// flattens them, and format_sql breaks each one clause per line. Nothing here runs SQL.

#include <string>
#include <string_view>
#include <vector>

#include "core/sql/statements.hpp"

namespace dblock::sql {

/// The statements of one dialect, in the order added, each id once. A set added again as a
/// variant (MariaDB, --table-format shedlock) adds only the statements whose text differs,
/// their id followed by " (variant)".
class StatementCatalog {
 public:
  void add(const LeaseStatements& s, std::string_view variant = {});
  void add(const ShedlockStatements& s, std::string_view variant = {});
  void add(const InspectStatements& s, std::string_view variant = {});
  void add(const ReleaseStatements& s, std::string_view variant = {});
  void add(const DoctorStatements& s, std::string_view variant = {});
  void add(const SchemaStatements& s, std::string_view variant = {});
  void add(const LockStatements& s, std::string_view variant = {});
  void add(const FailoverStatements& s, std::string_view variant = {});
  /// One statement; an empty one is left out (the dialect does without it).
  void add(const Statement& s, std::string_view variant = {});

  const std::vector<Statement>& statements() const { return list_; }

 private:
  std::vector<Statement> list_;
};

/// `sql` one clause per line (SELECT, FROM, WHERE, SET, VALUES, ON CONFLICT, RETURNING,
/// UNION ...), each subquery indented under its parenthesis, and any other part that does not
/// fit in `width` columns broken before AND, OR, WHEN, ELSE and after its commas. Only
/// whitespace outside quotes changes. Text that has line breaks already (DDL) is kept as written.
/// 101 columns: dblock schema --statements's, the last line's ";" within them.
std::string format_sql(std::string_view sql, int width = 101);

}  // namespace dblock::sql

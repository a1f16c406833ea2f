#include "backends/sqlite/sqlite_dsn.hpp"

namespace dblock::sqlite {

Result<std::string> database_path(const Dsn& dsn) {
  std::string_view rest = dsn.text;
  if (!rest.starts_with("sqlite:")) return invalid_dsn(dsn, "expected sqlite:/path/to/file.db");
  rest.remove_prefix(std::string_view("sqlite:").size());
  if (rest.starts_with("//")) rest.remove_prefix(2);
  if (rest.empty()) return invalid_dsn(dsn, "no database file (use sqlite:/path/to/file.db)");
  return std::string(rest);
}

}  // namespace dblock::sqlite

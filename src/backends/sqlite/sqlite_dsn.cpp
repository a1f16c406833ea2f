#include "backends/sqlite/sqlite_dsn.hpp"

namespace dblock::sqlite {
namespace {

constexpr std::string_view use_absolute = "use sqlite:/abs/path or sqlite:///abs/path";

}  // namespace

Result<std::string> database_path(const Dsn& dsn) {
  std::string_view rest = dsn.text;
  if (!rest.starts_with("sqlite:")) return invalid_dsn(dsn, "expected sqlite:/path/to/file.db");
  rest.remove_prefix(std::string_view("sqlite:").size());
  if (rest.starts_with("//")) {
    rest.remove_prefix(2);
    // sqlite://tmp/x.db reads as the host "tmp": SQLite has no host, and treating it as the
    // relative path tmp/x.db would put the database wherever the job happens to start.
    if (!rest.empty() && !rest.starts_with("/")) {
      const std::string host(rest.substr(0, rest.find('/')));
      return invalid_dsn(dsn, "a sqlite DSN has no host part ('" + host + "'); " + std::string(use_absolute));
    }
  }
  if (rest.empty()) return invalid_dsn(dsn, "no database file (" + std::string(use_absolute) + ")");
  // A relative path depends on the directory dblock starts in (a cron job's is its home), so
  // two jobs meant to share a lock could each get a database of their own.
  if (!rest.starts_with("/"))
    return invalid_dsn(dsn, "the path " + std::string(rest) + " is relative; " + std::string(use_absolute));
  return std::string(rest);
}

}  // namespace dblock::sqlite

#include "backends/registry.hpp"

#include <algorithm>

namespace dblock {

// Each backend's .cpp keeps its classes in an anonymous namespace and exposes only this.
BackendEntry sqlite_backend_entry();
BackendEntry mysql_backend_entry();
BackendEntry postgres_backend_entry();

std::span<const BackendEntry> backend_entries() {
  static const std::vector<BackendEntry> entries{
      sqlite_backend_entry(),
      mysql_backend_entry(),
      postgres_backend_entry(),
  };
  return entries;
}

const BackendEntry* find_backend(std::string_view name) {
  for (const auto& entry : backend_entries())
    if (entry.name == name) return &entry;
  return nullptr;
}

Result<Dsn> parse_dsn(std::string_view text) {
  Dsn dsn;
  dsn.text = std::string(text);
  dsn.redacted = redact_dsn(text);
  if (text.empty()) return invalid_dsn(dsn, "empty DSN");
  const std::string_view scheme = text.substr(0, text.find(':'));
  for (const auto& entry : backend_entries()) {
    if (std::ranges::find(entry.schemes, scheme) == entry.schemes.end() || scheme.size() == text.size()) continue;
    dsn.backend = std::string(entry.name);
    if (auto ok = entry.check_dsn(dsn); !ok) return std::unexpected(ok.error());
    return dsn;
  }
  return invalid_dsn(dsn, "unknown scheme (use sqlite:/path.db, mysql://..., mariadb://..., postgres://...)");
}

Result<std::unique_ptr<Backend>> open_backend(const Dsn& dsn, const BackendOptions& options) {
  const BackendEntry* entry = find_backend(dsn.backend);
  if (!entry) return fail(ErrorKind::config, "no backend for DSN " + dsn.redacted);
  return entry->open(dsn, options);
}

std::string describe_strategies(const BackendEntry& entry) {
  std::string text;
  for (std::size_t i = 0; i < entry.strategies.size(); ++i) {
    if (i > 0) text += (i + 1 == entry.strategies.size()) ? " and " : ", ";
    text += to_string(entry.strategies[i]);
  }
  return text;
}

}  // namespace dblock

#include "backends/registry.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <mutex>

#include "backends/mysql/mysql_descriptor.hpp"
#include "backends/postgres/postgres_descriptor.hpp"
#include "backends/sqlite/sqlite_descriptor.hpp"

namespace dblock {

std::span<const KnownBackend> known_backends() {
  // The backends' own descriptors (headers only: nothing of a module is loaded); the build adds
  // the client library each module is compiled against (cmake/Dependencies.cmake).
  static constexpr std::array<KnownBackend, 3> backends{{
      {sqlite::descriptor, ""},
      {mysql::descriptor, DBLOCK_MYSQL_CLIENT},
      {postgres::descriptor, DBLOCK_POSTGRES_CLIENT},
  }};
  return backends;
}

const KnownBackend* find_backend(std::string_view name) {
  const auto known = known_backends();
  const auto it = std::ranges::find(known, name, &KnownBackend::name);
  return it == known.end() ? nullptr : &*it;
}

Result<const BackendEntry*> load_backend(std::string_view name) {
  const KnownBackend* known = find_backend(name);
  if (!known) return fail(ErrorKind::usage, "unknown backend '" + std::string(name) + "'");
  // Loaded once per process; several threads may open their first connection at once (tests).
  static std::mutex mutex;
  static std::map<std::string_view, const BackendEntry*> loaded;
  std::lock_guard lock(mutex);
  if (auto found = loaded.find(known->name); found != loaded.end()) return found->second;
  auto code = registry_detail::backend_code(*known);
  if (!code) return std::unexpected(code.error());
  loaded.emplace(known->name, *code);
  return *code;
}

std::string module_path(const KnownBackend& backend) { return registry_detail::find_module(backend); }

Result<Dsn> parse_dsn(std::string_view text) {
  Dsn dsn;
  dsn.text = std::string(text);
  dsn.redacted = redact_dsn(text);
  if (text.empty()) return invalid_dsn(dsn, "empty DSN");
  if (auto ok = check_user_info(dsn); !ok) return std::unexpected(ok.error());
  const std::string_view scheme = text.substr(0, text.find(':'));
  for (const auto& known : known_backends()) {
    if (std::ranges::find(known.schemes, scheme) == known.schemes.end() || scheme.size() == text.size()) continue;
    dsn.backend = std::string(known.name);
    // The backend's own parameters are its business, so its code is loaded here already.
    auto entry = load_backend(known.name);
    if (!entry) return std::unexpected(entry.error());
    if (auto ok = (*entry)->check_dsn(dsn); !ok) return std::unexpected(ok.error());
    return dsn;
  }
  return invalid_dsn(dsn, "unknown scheme (use sqlite:/path.db, mysql://..., mariadb://..., postgres://...)");
}

Result<std::unique_ptr<Backend>> open_backend(const Dsn& dsn, const BackendOptions& options) {
  auto entry = load_backend(dsn.backend);
  if (!entry) return std::unexpected(entry.error());
  return (*entry)->open(dsn, options);
}

std::string describe_strategies(std::span<const Strategy> strategies) {
  std::string text;
  for (std::size_t i = 0; i < strategies.size(); ++i) {
    if (i > 0) text += (i + 1 == strategies.size()) ? " and " : ", ";
    text += to_string(strategies[i]);
  }
  return text;
}

}  // namespace dblock

#pragma once
// Backends registered by DSN scheme in one table (ccache's idea); `--version` lists them.

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/common/dsn.hpp"

namespace dblock {

struct BackendEntry {
  std::string_view name;                     // "sqlite"
  std::vector<std::string_view> schemes;     // DSN schemes it serves
  std::vector<Strategy> strategies;          // what it can do
  /// The DDL `dblock schema` prints and `init` runs, for this dialect and prefix.
  std::string (*schema_sql)(const std::string& prefix);
  /// Checks everything after the scheme (the backend's own parameters); ErrorKind::config
  /// without the password. Called when the DSN is read, before anything connects.
  Result<void> (*check_dsn)(const Dsn& dsn);
  /// Opens a connection; ErrorKind::connection / config on failure.
  Result<std::unique_ptr<Backend>> (*open)(const Dsn& dsn, const BackendOptions& options);
};

/// Every compiled-in backend.
std::span<const BackendEntry> backend_entries();

/// The entry whose name is `name` ("sqlite", "mysql", "postgres"), or nullptr.
const BackendEntry* find_backend(std::string_view name);

/// Picks the backend by the DSN's scheme and lets it check the rest; ErrorKind::config with a
/// message that never contains the password.
Result<Dsn> parse_dsn(std::string_view text);

/// Opens the backend that serves dsn.backend.
Result<std::unique_ptr<Backend>> open_backend(const Dsn& dsn, const BackendOptions& options);

/// "lease, advisory, for-update and txn-insert" style list for messages.
std::string describe_strategies(const BackendEntry& entry);

}  // namespace dblock

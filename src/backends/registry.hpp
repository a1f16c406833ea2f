#pragma once
// Backends registered by DSN scheme in one table. The executable links SQLite
// in and loads the server backends from modules on first use of their scheme, so a SQLite run
// maps no server client library (docs/design.md, "Backend modules").

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/backend_entry.hpp"

namespace dblock {

/// What the executable knows of a backend without loading any of its code (`--version`
/// prints it): the backend's own descriptor and what the build adds.
struct KnownBackend : BackendDescriptor {
  /// A module's client library as built against ("libpq 15.20"); empty when linked in (its
  /// BackendEntry::client_version costs nothing to ask).
  std::string_view built_with;
};

/// Every backend dblock knows, in the order `--version` lists them.
std::span<const KnownBackend> known_backends();

/// The known backend of that name, or nullptr.
const KnownBackend* find_backend(std::string_view name);

/// The backend's code: linked in, or its module loaded on the first call (and kept loaded).
/// A module that is missing or cannot be loaded is ErrorKind::other (exit 69) naming the
/// Debian package to install; an unknown name is ErrorKind::usage.
Result<const BackendEntry*> load_backend(std::string_view name);

/// Where the module of `backend` is, if it is installed ("" when linked in or not found);
/// loads nothing (`--version`).
std::string module_path(const KnownBackend& backend);

/// Picks the backend by the DSN's scheme and lets it check the rest; ErrorKind::config with a
/// message that never contains the password.
Result<Dsn> parse_dsn(std::string_view text);

/// Opens the backend that serves dsn.backend.
Result<std::unique_ptr<Backend>> open_backend(const Dsn& dsn, const BackendOptions& options);

/// "lease, advisory, for-update and txn-insert" style list for messages.
std::string describe_strategies(std::span<const Strategy> strategies);

// Implemented twice: backend_code_modules.cpp (the executable: SQLite linked, servers from
// modules) and backend_code_linked.cpp (test programs: every backend linked in).
namespace registry_detail {
Result<const BackendEntry*> backend_code(const KnownBackend& backend);
std::string find_module(const KnownBackend& backend);
}  // namespace registry_detail

}  // namespace dblock

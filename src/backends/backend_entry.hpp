#pragma once
// What a backend's code hands the registry (registry.hpp): its descriptor and its functions.
// Each backend's <name>_backend.cpp returns one; this header sits below both, so a backend
// never includes the registry that loads it.

#include <memory>
#include <string>
#include <vector>

#include "backends/backend_descriptor.hpp"
#include "backends/common/dsn.hpp"
#include "core/backend.hpp"
#include "core/sql/sql_session.hpp"

namespace dblock {

/// What a backend's code provides, linked in or exported by its module: its descriptor (the
/// one the registry's table has; the executable compares the names before using a module) and
/// its functions.
struct BackendEntry : BackendDescriptor {
  /// The DDL `dblock schema` prints and `init` runs, for this dialect, the table prefix and,
  /// with --table-format shedlock, ShedLock's table (its documented DDL).
  std::string (*schema_sql)(const BackendOptions& options);
  /// Every statement dblock can run on this dialect, named (`dblock schema --statements`):
  /// those of each strategy, inspection, doctor and the DDL, with their variants (MariaDB,
  /// --table-format shedlock) where the text differs.
  std::vector<sql::Statement> (*statements)(const BackendOptions& options);
  /// Checks everything after the scheme (the backend's own parameters); ErrorKind::config
  /// without the password. Called when the DSN is read, before anything connects.
  Result<void> (*check_dsn)(const Dsn& dsn);
  /// Opens a connection; ErrorKind::connection / config on failure.
  Result<std::unique_ptr<Backend>> (*open)(const Dsn& dsn, const BackendOptions& options);
  /// The client library and the version loaded at run time ("libpq 15.20"), for --version.
  std::string (*client_version)();
};

}  // namespace dblock

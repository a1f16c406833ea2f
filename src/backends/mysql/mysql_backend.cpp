// Placeholder until the mysql backend lands: a DSN for it is a clear configuration error.
#include "backends/registry.hpp"

namespace dblock {

BackendEntry mysql_backend_entry() {
  return BackendEntry{
      "mysql",
      {"mysql", "mariadb"},
      {Strategy::lease, Strategy::advisory, Strategy::for_update, Strategy::txn_insert},
      [](const std::string&) { return std::string("-- the mysql backend is not built yet\n"); },
      [](const Dsn&, const BackendOptions&) -> Result<std::unique_ptr<Backend>> {
        return fail(ErrorKind::config, "the mysql backend is not available in this build yet");
      },
  };
}

}  // namespace dblock

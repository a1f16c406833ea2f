// Placeholder until the sqlite backend lands: a DSN for it is a clear configuration error.
#include "backends/registry.hpp"

namespace dblock {

BackendEntry sqlite_backend_entry() {
  return BackendEntry{
      "sqlite",
      {"sqlite"},
      {Strategy::lease},
      [](const std::string&) { return std::string("-- the sqlite backend is not built yet\n"); },
      [](const Dsn&, const BackendOptions&) -> Result<std::unique_ptr<Backend>> {
        return fail(ErrorKind::config, "the sqlite backend is not available in this build yet");
      },
  };
}

}  // namespace dblock

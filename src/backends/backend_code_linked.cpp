// Test programs link every backend in, so they test the backends' code without modules; the
// executable's module loading is tested end to end (tests/e2e/once_modules.sh).
#include "backends/registry.hpp"

namespace dblock {

BackendEntry sqlite_backend_entry();
BackendEntry mysql_backend_entry();
BackendEntry postgres_backend_entry();

namespace registry_detail {

Result<const BackendEntry*> backend_code(const KnownBackend& backend) {
  static const BackendEntry sqlite = sqlite_backend_entry();
  static const BackendEntry mysql = mysql_backend_entry();
  static const BackendEntry postgres = postgres_backend_entry();
  for (const BackendEntry* entry : {&sqlite, &mysql, &postgres})
    if (entry->name == backend.name) return entry;
  return fail(ErrorKind::internal, "backend " + std::string(backend.name) + " is not linked in");
}

std::string find_module(const KnownBackend&) { return {}; }

}  // namespace registry_detail
}  // namespace dblock

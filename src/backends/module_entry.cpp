// The one exported symbol of a backend module (dblock-<name>.so), compiled into each module
// with DBLOCK_MODULE_BACKEND set to its entry function. The executable calls it right after
// dlopen (backend_code_modules.cpp) and uses the entry only when the ABI strings match: the
// module calls dblock's own functions in the executable, so both must come from one build.
#include <cstring>

#include "backends/backend_entry.hpp"

namespace dblock {
BackendEntry DBLOCK_MODULE_BACKEND();
}  // namespace dblock

extern "C" __attribute__((visibility("default"))) const dblock::BackendEntry* dblock_backend_module(const char* abi) {
  if (!abi || std::strcmp(abi, DBLOCK_MODULE_ABI) != 0) return nullptr;
  static const dblock::BackendEntry entry = dblock::DBLOCK_MODULE_BACKEND();
  return &entry;
}

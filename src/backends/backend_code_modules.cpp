// The executable's backends: SQLite is linked in; each server backend is a module loaded with
// dlopen the first time its DSN scheme is used, so a SQLite
// run never maps libpq or libmariadb and the TLS, Kerberos and LDAP libraries behind them.
//
// A module is found next to the executable's install location (DBLOCK_MODULE_RELDIR, relative
// to the directory of /proc/self/exe, so a relocated or unpacked tree works), or in the same
// directory as the executable (the build tree). It resolves dblock's own symbols against the
// executable (exported with a dynamic list, CMakeLists.txt), so it must come from the same
// build: DBLOCK_MODULE_ABI is compared before anything of it runs.
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <climits>
#include <filesystem>

#include "backends/registry.hpp"

namespace dblock {

BackendEntry sqlite_backend_entry();

namespace registry_detail {
namespace {

// The one symbol a module exports (src/backends/module_entry.cpp).
using ModuleEntryFn = const BackendEntry* (*)(const char* abi);
constexpr const char* module_entry_symbol = "dblock_backend_module";

std::string executable_dir() {
  std::array<char, PATH_MAX> buf{};
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return {};
  std::string path(buf.data(), static_cast<std::size_t>(n));
  return path.substr(0, path.rfind('/'));
}

std::vector<std::string> module_dirs() {
  const std::string exe_dir = executable_dir();
  if (exe_dir.empty()) return {};
  return {std::filesystem::path(exe_dir + "/" DBLOCK_MODULE_RELDIR).lexically_normal().string(), exe_dir};
}

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

std::string find_module(const KnownBackend& backend) {
  if (backend.module.empty()) return {};
  for (const std::string& dir : module_dirs()) {
    std::string path = dir + "/" + std::string(backend.module);
    if (is_file(path)) return path;
  }
  return {};
}

Result<const BackendEntry*> backend_code(const KnownBackend& backend) {
  if (backend.module.empty()) {
    static const BackendEntry sqlite = sqlite_backend_entry();
    return &sqlite;
  }
  const std::string name(backend.name);
  const std::string package(backend.package);
  const std::string path = find_module(backend);
  if (path.empty()) {
    const auto dirs = module_dirs();
    return fail(ErrorKind::other, "the " + name + " backend is not installed: no " + std::string(backend.module) +
                                      " in " + (dirs.empty() ? std::string("?") : dirs.front()) +
                                      " (install the Debian package " + package + ")");
  }
  // Never closed: the client libraries register exit handlers of their own.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    return fail(ErrorKind::other, "cannot load the " + name + " backend: " + (why ? why : path) +
                                      " (reinstall the Debian package " + package + " and what it depends on)");
  }
  auto entry_fn = reinterpret_cast<ModuleEntryFn>(::dlsym(handle, module_entry_symbol));
  const BackendEntry* entry = entry_fn ? entry_fn(DBLOCK_MODULE_ABI) : nullptr;
  if (!entry || entry->name != backend.name)
    return fail(ErrorKind::other, path + " is not the " + name + " backend of this dblock (" DBLOCK_MODULE_ABI
                                         "): install the " + package + " package of the same version as dblock");
  return entry;
}

}  // namespace registry_detail
}  // namespace dblock

#pragma once
// What a backend is, as data the executable can read without loading its code: each backend
// states it once, in <name>/<name>_descriptor.hpp, and both its own entry (the module's, for
// the backend's code) and the registry's table (for `--version`, DSN schemes and `schema
// --dialect`) use that one constant. Header only and free of client libraries, so the registry
// includes every backend's descriptor and still maps no server library.

#include <span>
#include <string_view>

#include "core/lock_types.hpp"

namespace dblock {

struct BackendDescriptor {
  std::string_view name;                      // "mysql"
  std::span<const std::string_view> schemes;  // DSN schemes it serves
  std::span<const Strategy> strategies;       // what it can do
  std::string_view module;                    // "dblock-mysql.so"; empty: linked into the executable
  std::string_view package;                   // the Debian package that ships it
  char identifier_quote;                      // how its SQL quotes a table name (quote_identifier)
  bool server_clock;                          // leases in the server's time; false: each host's
                                              // CLOCK_BOOTTIME (SQLite has no server, dblock(1))
};

}  // namespace dblock

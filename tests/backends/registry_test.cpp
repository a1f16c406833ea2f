// The registry's table of known backends (what the executable knows without loading a module)
// must agree with what each backend's own code says, or a DSN would be routed to a module
// that does not serve it.
#include <doctest/doctest.h>

#include "backends/registry.hpp"

using namespace dblock;

TEST_CASE("every known backend's names and schemes match its code") {
  for (const KnownBackend& known : known_backends()) {
    CAPTURE(known.name);
    auto entry = load_backend(known.name);
    REQUIRE(entry.has_value());
    CHECK((*entry)->name == known.name);
    CHECK((*entry)->schemes == known.schemes);
    CHECK_FALSE((*entry)->strategies.empty());
    // --version prints the known table's strategies and client library without loading a module.
    CHECK((*entry)->strategies == known.strategies);
    if (!known.module.empty()) CHECK((*entry)->client_version() == known.built_with);
    // SQLite is built in; every other backend is a module with a package that ships it.
    CHECK(known.module.empty() == (known.name == "sqlite"));
    CHECK_FALSE(known.package.empty());
  }
}

TEST_CASE("an unknown backend name is a usage error") {
  auto entry = load_backend("oracle");
  REQUIRE_FALSE(entry.has_value());
  CHECK(entry.error().kind == ErrorKind::usage);
}

// The registry's table of known backends (what the executable knows without loading a module)
// is made of each backend's own descriptor: these check that the code behind each entry is the
// backend the table says, so a DSN scheme or `schema --dialect` reaches the right code.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>

#include "backends/registry.hpp"
#include "core/sql/identifiers.hpp"

using namespace dblock;

TEST_CASE("every known backend's code carries the descriptor of the table") {
  for (const KnownBackend& known : known_backends()) {
    CAPTURE(known.name);
    auto entry = load_backend(known.name);
    REQUIRE(entry.has_value());
    CHECK((*entry)->name == known.name);
    CHECK(std::ranges::equal((*entry)->schemes, known.schemes));
    CHECK(std::ranges::equal((*entry)->strategies, known.strategies));
    CHECK((*entry)->identifier_quote == known.identifier_quote);
    CHECK_FALSE(known.schemes.empty());
    CHECK_FALSE(known.strategies.empty());
    // --version prints the client library a module was built with, without loading it.
    if (!known.module.empty()) CHECK((*entry)->client_version() == known.built_with);
    // SQLite is built in; every other backend is a module with a package that ships it.
    CHECK(known.module.empty() == (known.name == "sqlite"));
    CHECK_FALSE(known.package.empty());
  }
}

TEST_CASE("a DSN scheme or a name picks exactly one backend") {
  std::set<std::string_view> names;
  std::set<std::string_view> schemes;
  for (const KnownBackend& known : known_backends()) {
    CHECK(names.insert(known.name).second);
    for (std::string_view scheme : known.schemes) CHECK(schemes.insert(scheme).second);
  }
}

TEST_CASE("the descriptor's identifier quote is the one the backend's own statements use") {
  for (const KnownBackend& known : known_backends()) {
    CAPTURE(known.name);
    const BackendEntry* entry = load_backend(known.name).value();
    BackendOptions options;
    options.table_prefix = "p_";
    options.shedlock = true;
    options.shedlock_table = "shed";
    const std::string ddl = entry->schema_sql(options);
    CHECK(ddl.find(quote_identifier("p_locks", known.identifier_quote)) != std::string::npos);
    CHECK(ddl.find(quote_identifier("shed", known.identifier_quote)) != std::string::npos);
  }
}

TEST_CASE("an unknown backend name is a usage error") {
  auto entry = load_backend("oracle");
  REQUIRE_FALSE(entry.has_value());
  CHECK(entry.error().kind == ErrorKind::usage);
}

#pragma once
// Where the conformance suite finds its database: DBLOCK_TEST_BACKEND / DBLOCK_TEST_STRATEGY
// pick the cell of the matrix (tests/CMakeLists.txt); server DSNs come from the environment.

#include <memory>
#include <string>

#include "backends/backend.hpp"
#include "backends/common/dsn.hpp"

namespace dblock::test {

/// "sqlite", "mysql" or "postgres" (default sqlite).
std::string backend_name();
/// The strategy under test (default lease).
Strategy strategy();
/// A DSN for the backend under test: a fresh SQLite file in a temp dir, or the server DSN
/// from DBLOCK_TEST_MYSQL_DSN / DBLOCK_TEST_POSTGRES_DSN. Without one the process exits 77
/// (skipped), or fails when CI=true: CI must never skip a server test.
std::string dsn();
/// A table prefix no other test run uses, so runs against a shared server never collide.
std::string unique_prefix();
/// A key no other test uses.
std::string unique_key(const std::string& stem);
/// Opens the backend under test with the given prefix (unique_prefix() by default).
std::unique_ptr<Backend> open(const BackendOptions& options);

}  // namespace dblock::test

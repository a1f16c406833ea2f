#pragma once
// Where the conformance suite finds its database: DBLOCK_TEST_BACKEND / DBLOCK_TEST_STRATEGY
// pick the cell of the matrix (tests/CMakeLists.txt); server DSNs come from the environment.
// The per-backend knowledge a common test case needs (a DSN that cannot work, a statement run
// by hand on the server, how to kill a session) lives here, so the cases in the common suites
// ("all", "lease", "session") carry no per-backend code.

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/common/dsn.hpp"
#include "core/backend.hpp"

namespace dblock::test {

/// "sqlite", "mysql" or "postgres" (default sqlite).
std::string backend_name();
/// The strategy under test (default lease).
Strategy strategy();
/// A DSN for the backend under test: a fresh SQLite file in a temp dir, or the server DSN
/// from DBLOCK_TEST_MYSQL_DSN / DBLOCK_TEST_POSTGRES_DSN. Without one the process exits 77
/// (skipped), or fails when CI=true: CI must never skip a server test.
std::string dsn();
/// The DSN of the tests' own statements (admin_sql, accounts they make): the server's plain
/// DSN, also when dsn() goes over TLS (DBLOCK_TEST_TLS=1, which picks
/// DBLOCK_TEST_MYSQL_TLS_DSN / DBLOCK_TEST_POSTGRES_TLS_DSN for dsn()). SQLite: dsn().
std::string admin_dsn();
/// The value of the environment variable `var` naming a server DSN; exits 77 (skipped) or 1
/// (CI=true) when it is unset.
std::string server_dsn(const char* var);
/// The password of dsn(), "" when it has none (SQLite): no error message may show it.
std::string password();
/// A table prefix no other test run uses, so runs against a shared server never collide.
std::string unique_prefix();
/// A key no other test uses.
std::string unique_key(const std::string& stem);
/// Opens the backend under test (or the one `dsn_text` names) with the given options.
std::unique_ptr<Backend> open(const BackendOptions& options);
std::unique_ptr<Backend> open(const BackendOptions& options, const std::string& dsn_text);

/// The password put into broken DSNs: it must never appear in an error message.
inline constexpr std::string_view wrong_password = "Wr0ng-Pa55word-xyz";

/// A DSN of the backend under test that cannot work, and the ErrorKind dblock must report.
struct BrokenDsn {
  std::string what;  // for the test log
  std::string dsn;
  ErrorKind kind;
};
/// Servers: wrong password (config), unknown database (config), closed port (connection).
/// SQLite: a file whose parent is a regular file and a directory in place of the file (both
/// connection: the file cannot be opened).
std::vector<BrokenDsn> broken_dsns();

/// Runs one statement on the database under test through the client library itself (not
/// dblock's code) and returns the first column of the first row ("" when there is none).
/// Throws std::runtime_error (a test failure) when the statement fails. Test SQL only: the
/// callers put nothing but their own table names and integers into it.
std::string admin_sql(const std::string& sql);

/// The server session id stored for the holder of `token` in the table `<prefix>locks`
/// (session strategies), "" when there is none.
std::string holder_session(const std::string& table_prefix, std::int64_t token);
/// Ends a server session as an operator would (MySQL: KILL CONNECTION; PostgreSQL:
/// pg_terminate_backend). Servers only.
void kill_session(const std::string& session_id);

/// Calls `open_and_acquire(dsn)` while the server ends dblock's idle sessions after 1-2 s:
/// PostgreSQL gets idle_session_timeout and idle_in_transaction_session_timeout of 1 s in the
/// DSN; MariaDB's global wait_timeout is 2 s during the call (a connection keeps the value it
/// started with) and restored right after, so parallel tests are not hit. Servers only.
void with_short_idle_timeouts(const std::function<void(const std::string& dsn)>& open_and_acquire);

}  // namespace dblock::test

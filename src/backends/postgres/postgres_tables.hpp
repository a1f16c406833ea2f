#pragma once
// Shared pieces of the postgres backend: table names, schema, history, the lockers' factories.

#include <cstdint>
#include <memory>
#include <string>

#include "backends/backend.hpp"
#include "backends/common/identifiers.hpp"
#include "backends/common/statements.hpp"
#include "backends/postgres/postgres_connection.hpp"

namespace dblock::postgres {

/// Quoted table names for one prefix.
struct Tables {
  std::string prefix;
  std::string locks, runs, claims;  // quoted
};
Tables tables_for(const std::string& prefix);

/// The tables, made on first use and checked by doctor (common/schema.hpp): dblock's, and
/// ShedLock's with --table-format shedlock (postgres_statements.cpp).
sql::SchemaStatements schema_statements(const BackendOptions& options);
/// common/schema.hpp's ensure_schema on `conn`, for the session strategies' bookkeeping.
Result<void> ensure_schema(Connection& conn, const Tables& t);

/// SQL, over the <prefix>locks row aliased `row`: the server's evidence that its session_id
/// (a backend pid, which the server reuses) holds that row's key, as text for session_holds_sql:
/// the session's advisory locks in the strategy's form (advisory, txn-insert), or that it runs
/// the open transaction which locked the key's claims row (for-update); NULL for none.
std::string session_verdict(const Tables& t, std::string_view row);
/// Whether session_verdict's text shows the lock of the key, in SQL; status and `release --force`
/// both judge the holder by this: `strategy`, `verdict`, and `hi` and `lo`, the halves of the key's
/// key_hash (as session_verdict shows them), are SQL expressions.
std::string session_holds_sql(std::string_view strategy, std::string_view verdict, std::string_view hi,
                              std::string_view lo);

/// The statements of the lease strategy (src/backends/common/lease_locker.cpp), whole, for the
/// tables of `prefix` (postgres_statements.cpp).
sql::LeaseStatements lease_statements(const std::string& prefix);

/// --table-format shedlock: the statements of the common ShedLock locker (postgres_statements.cpp).
sql::ShedlockStatements shedlock_statements(const BackendOptions& options);

/// status, history, the clock, slot counts and `dblock renew` (common/inspect.hpp), for the
/// table format of `options` (postgres_statements.cpp).
sql::InspectStatements inspect_statements(const BackendOptions& options);
/// `dblock release` of another process's holder (common/sql_backend.hpp).
sql::ReleaseStatements release_statements(const std::string& prefix);
/// doctor's checks (common/sql_backend.hpp); the pooler's is postgres_backend.cpp's.
sql::DoctorStatements doctor_statements(const std::string& prefix);

/// advisory / for-update / txn-insert (common/session_locker.hpp) with the server lock in the
/// holder session `holder` (postgres_session_lock.cpp).
Result<std::unique_ptr<Locker>> make_session_locker(Strategy s, std::shared_ptr<Connection> holder, const Dsn& dsn,
                                                   const BackendOptions& options, Tables t,
                                                   std::shared_ptr<const sql::SchemaStatements> schema);

}  // namespace dblock::postgres

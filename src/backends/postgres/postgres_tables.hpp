#pragma once
// What the PostgreSQL backend's files share: table names, the statements (postgres_statements.cpp)
// and the session strategies' locker (postgres_session_lock.cpp).

#include <cstdint>
#include <memory>
#include <string>

#include "backends/postgres/postgres_connection.hpp"
#include "core/backend.hpp"
#include "core/sql/identifiers.hpp"
#include "core/sql/statements.hpp"

namespace dblock::postgres {

/// Quoted table names for one prefix.
struct Tables {
  std::string prefix;
  std::string locks, runs, claims;  // quoted
};
Tables tables_for(const std::string& prefix);

/// The tables, made on first use and checked by doctor (core/sql/schema.hpp): dblock's, and
/// ShedLock's with --table-format shedlock (postgres_statements.cpp).
sql::SchemaStatements schema_statements(const BackendOptions& options);
/// The statements of the lease strategy (src/core/sql/lease_locker.cpp), whole, for the
/// tables of `prefix` (postgres_statements.cpp).
sql::LeaseStatements lease_statements(const std::string& prefix);

/// The advisory strategy's lock and its row's numbering in one statement
/// (postgres_session_lock.cpp): `take_try` and `take_wait` (:lock, the key's hash; take_wait also
/// :lock_timeout) take the lock, then, taken, run session.take (with its parameters): one row
/// of (taken, token, acquired_ms, NULL).
struct AdvisoryStatements {
  sql::Statement take_try, take_wait;
};
AdvisoryStatements advisory_statements(const std::string& prefix);

/// --table-format shedlock: the statements of the common ShedLock locker (postgres_statements.cpp).
sql::ShedlockStatements shedlock_statements(const BackendOptions& options);

/// status, history, the clock, slot counts and `dblock renew` (core/sql/inspect.hpp), for the
/// table format of `options` (postgres_statements.cpp).
sql::InspectStatements inspect_statements(const BackendOptions& options);
/// `dblock release` of another process's holder (core/sql/sql_backend.hpp).
sql::ReleaseStatements release_statements(const std::string& prefix);
/// doctor's checks (core/sql/sql_backend.hpp); the pooler's is postgres_backend.cpp's.
sql::DoctorStatements doctor_statements(const std::string& prefix);

/// advisory / for-update / txn-insert (core/sql/session_locker.hpp) with the server lock in the
/// holder session `holder` (postgres_session_lock.cpp).
Result<std::unique_ptr<Locker>> make_session_locker(Strategy s, std::shared_ptr<Connection> holder, const Dsn& dsn,
                                                   const BackendOptions& options, Tables t,
                                                   std::shared_ptr<const sql::SchemaStatements> schema);

}  // namespace dblock::postgres

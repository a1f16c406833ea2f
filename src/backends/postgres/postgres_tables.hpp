#pragma once
// What the PostgreSQL backend's files share: the statements (postgres_statements.cpp)
// and the session strategies' locker (postgres_session_lock.cpp).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/postgres/postgres_connection.hpp"
#include "core/backend.hpp"
#include "core/sql/identifiers.hpp"
#include "core/sql/statements.hpp"

namespace dblock::postgres {

/// The tables, made on first use and checked by doctor (core/sql/schema.hpp): dblock's, and
/// ShedLock's with --table-format shedlock (postgres_statements.cpp).
sql::SchemaStatements schema_statements(const BackendOptions& options);

/// The statements of the common lease, session and ShedLock lockers, of inspection, of
/// `dblock release` and of doctor (postgres_statements.cpp).
sql::LeaseStatements lease_statements(const std::string& prefix);
sql::ShedlockStatements shedlock_statements(const BackendOptions& options);
sql::InspectStatements inspect_statements(const BackendOptions& options);
sql::ReleaseStatements release_statements(const std::string& prefix);
sql::DoctorStatements doctor_statements(const BackendOptions& options);

/// The session strategies' server lock (core/sql/statements.hpp). Parameters also :lock (the
/// key's hash), :hi and :lo (its halves as two ints), :lock_timeout (postgres_session_lock.cpp).
sql::LockStatements lock_statements(const std::string& prefix);

/// A lease waiter's queue (postgres_connection.cpp, ListenWake), on :lock, a key's queue lock
/// (core's, rules.hpp): wait takes it within :lock_timeout (lock_not_available, 55P03, when the
/// wait ended); leave gives it back.
sql::QueueStatements queue_statements();

/// advisory / for-update / txn-insert (core/sql/session_locker.hpp) with the server lock in the
/// holder session `holder` (postgres_session_lock.cpp).
/// `serving` judges the failover record's read (SqlBackend::serving_check). `book`, when set, is
/// the bookkeeping connection a row lock needs, opened already (alongside the holder's).
Result<std::unique_ptr<Locker>> make_session_locker(Strategy s, std::shared_ptr<Connection> holder, const Dsn& dsn,
                                                   const BackendOptions& options,
                                                   std::shared_ptr<const sql::SchemaStatements> schema,
                                                   sql::failover::ReadCheck serving,
                                                   std::unique_ptr<Connection> book = nullptr);

/// Whether a locker of `s` needs a bookkeeping connection besides its holder's: a row lock, held
/// in an open transaction, whose token must commit on its own.
constexpr bool needs_book(Strategy s) { return s == Strategy::for_update || s == Strategy::txn_insert; }

}  // namespace dblock::postgres

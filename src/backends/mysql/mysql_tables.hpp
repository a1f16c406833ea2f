#pragma once
// What the MySQL backend's files share: the statements (mysql_statements.cpp) and the session
// strategies' server lock (mysql_session_lock.cpp).

#include <memory>
#include <string>

#include "backends/mysql/mysql_connection.hpp"
#include "backends/mysql/mysql_error.hpp"
#include "core/backend.hpp"
#include "core/sql/session_locker.hpp"
#include "core/sql/statements.hpp"

namespace dblock::mysql {

/// The statements of the common lockers, of inspection, `release` and doctor, and the tables
/// made on first use (core/sql/schema.hpp), ShedLock's with --table-format shedlock.
sql::SchemaStatements schema_statements(const BackendOptions& options);
sql::LeaseStatements lease_statements(const std::string& prefix, bool mariadb);
sql::ShedlockStatements shedlock_statements(const BackendOptions& options);
sql::InspectStatements inspect_statements(const BackendOptions& options);
sql::ReleaseStatements release_statements(const std::string& prefix);
sql::DoctorStatements doctor_statements(const std::string& prefix, bool mariadb);

/// The GET_LOCK and claims-row statements of the session strategies' server lock and of the
/// lease's wake queue, on a key's hashed lock names. Parameters: :key, :kind (the claims row's),
/// :tag (the lock session's), :wait_ms, :seconds.
struct LockStatements {
  sql::Statement advisory_take, advisory_holds, advisory_give_back;
  sql::Statement lock_claim, lock_claim_nowait, make_claim, insert_claim, tag, untag, holds_claim, alive, lock_wait;
  /// wake_wait: within :wait_ms, true once this waiter holds the key's queue name (it is the
  /// next to try) or, holding it, once the holder gave the wake name back; false at once when
  /// nobody holds the wake name (core's backoff takes over).
  sql::Statement wake_hold, wake_release, wake_wait, queue_leave;
};
LockStatements lock_statements(const std::string& prefix);

/// The server lock of session strategy `s`, on a lock session of its own, opened here. The
/// row-lock strategies' waiters hear releases through `book`'s wake queue.
Result<std::unique_ptr<sql::SessionLock>> make_session_lock(Strategy s, const Dsn& dsn, const BackendOptions& options,
                                                            std::shared_ptr<Session> book);

}  // namespace dblock::mysql

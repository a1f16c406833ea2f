#pragma once
// What the MySQL backend's files share: the statements (mysql_statements.cpp) and the session
// strategies' holder session (mysql_session_lock.cpp).

#include <memory>
#include <string>
#include <vector>

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
sql::DoctorStatements doctor_statements(const BackendOptions& options, bool mariadb);

/// The session strategies' server lock (core/sql/statements.hpp), on a key's hashed lock names.
/// Parameters also :tag (the lock session's) and :seconds (the lock wait).
sql::LockStatements lock_statements(const std::string& prefix, bool mariadb);

/// The wake primitive's (NamedLockWake, mysql_connection.cpp). wake_wait: within :wait_ms, true once this waiter
/// holds the key's queue name (the next to try) or, holding it, once the holder gave the wake
/// name back; false at once when nobody holds the wake name (core's backoff takes over).
/// taken_holding (:key :owner :take_wake): LeaseStatements::taken, and with the row wake_hold's
/// work (the key's wake name taken unless :take_wake is 0, its queue name given back): a row-lock
/// holder's read of the token it was given and its first step as holder in one round trip
/// (NamedLockWake::reading_taken). A waiter that leaves the queue gives its names back with
/// wake_release (it holds no wake name of a key it waits for).
struct WakeStatements {
  sql::Statement wake_hold, wake_release, wake_wait, taken_holding;
};
WakeStatements wake_statements(const std::string& prefix);

/// The holder session of session strategy `s`, a connection of its own: `opened`
/// (open_holder_connection's, made beside the bookkeeping session), else opened here. The
/// row-lock strategies' waiters hear releases through `book`'s waiters' queue.
Result<std::unique_ptr<sql::HolderSession>> open_holder(Strategy s, const Dsn& dsn, const BackendOptions& options,
                                                        std::shared_ptr<Session> book,
                                                        std::unique_ptr<Connection> opened = nullptr);
/// A connection for session strategy `s`'s holder, with its session settings; safe to call on a
/// thread of its own, beside another connection's open.
Result<std::unique_ptr<Connection>> open_holder_connection(Strategy s, const Dsn& dsn, const BackendOptions& options);

}  // namespace dblock::mysql

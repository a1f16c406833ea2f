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
/// The same on `lease`, lease_statements(prefix, mariadb) built already: a run builds them once.
sql::LockStatements lock_statements(const std::string& prefix, bool mariadb, const sql::LeaseStatements& lease);

/// The wake primitive's (NamedLockWake, mysql_connection.cpp): core's, over the dialect's named
/// locks (core/sql/statements.hpp); :wake and :queue the key's two names (mysql_names.hpp,
/// Connection::run). On MariaDB (`mariadb`) with the wait the head of a key's queue sends ahead
/// of its lease take, in one block (Connection::run_behind).
using WakeStatements = sql::WakeStatements;
WakeStatements wake_statements(const std::string& prefix, bool mariadb);

/// The holder session of session strategy `s`, a connection of its own: `opened`
/// (open_holder_connection's, made beside the bookkeeping session), else opened here. The
/// row-lock strategies' waiters hear releases through `book`'s waiters' queue; `st` are the
/// strategy's statements (its numbering gate's: LockStatements::gate_*).
Result<std::unique_ptr<sql::HolderSession>> open_holder(Strategy s, const Dsn& dsn, const BackendOptions& options,
                                                        std::shared_ptr<Session> book, const sql::LockStatements& st,
                                                        std::unique_ptr<Connection> opened = nullptr);
/// A connection for session strategy `s`'s holder, with its session settings; safe to call on a
/// thread of its own, beside another connection's open.
Result<std::unique_ptr<Connection>> open_holder_connection(Strategy s, const Dsn& dsn, const BackendOptions& options);

}  // namespace dblock::mysql

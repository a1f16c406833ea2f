#pragma once
// What the MySQL backend's files share: table names, the statements (mysql_statements.cpp), the
// session strategies' server lock and the wake queue's lock names (mysql_session_lock.cpp).

#include <memory>
#include <string>

#include "backends/backend.hpp"
#include "backends/common/session_locker.hpp"
#include "backends/common/statements.hpp"
#include "backends/mysql/mysql_connection.hpp"
#include "backends/mysql/mysql_error.hpp"

namespace dblock::mysql {

/// Table names for one prefix (validated by core as an identifier), quoted with backticks.
struct Tables {
  std::string prefix;
  std::string locks;
  std::string runs;
  std::string claims;
};
Tables make_tables(const std::string& prefix);

/// The tables, made on first use and checked by doctor (common/schema.hpp): dblock's, and
/// ShedLock's with --table-format shedlock (mysql_statements.cpp).
sql::SchemaStatements schema_statements(const BackendOptions& options);

/// The statements of the common lease, session and ShedLock lockers and of inspection
/// (mysql_statements.cpp).
sql::LeaseStatements lease_statements(const std::string& prefix, bool mariadb);
sql::ShedlockStatements shedlock_statements(const BackendOptions& options);
sql::InspectStatements inspect_statements(const BackendOptions& options);
sql::ReleaseStatements release_statements(const std::string& prefix);
sql::DoctorStatements doctor_statements(const std::string& prefix, bool mariadb);

/// The server lock of session strategy `s` (mysql_session_lock.cpp), on a lock session of its
/// own, opened here. The row-lock strategies' waiters hear releases through `book`'s wake queue
/// (the bookkeeping session, where the holder keeps the key's wake name).
Result<std::unique_ptr<sql::SessionLock>> make_session_lock(Strategy s, const Dsn& dsn, const BackendOptions& options,
                                                            std::shared_ptr<Session> book);

/// SQL for the name of the GET_LOCK a lease holder keeps while it holds the key, so waiters can
/// block on it until the release instead of polling: "dblock-wake:" + 52 hex digits of the
/// same hash as the advisory name (64 characters, the server's limit).
Sql wake_name(const Tables& t, std::string_view key);

/// SQL for the name of the GET_LOCK the waiters for a key queue on: "dblock-queue:" + 51 hex
/// digits of the same hash. Only the waiter holding it waits on the wake name; the others wait
/// for it. So a release wakes one waiter, not all of them (each of which used to make an
/// attempt and go back to waiting, in turn, at every handoff). Its holder gives it back in the
/// statement that takes the key, and with the wake name at the release.
Sql queue_name(const Tables& t, std::string_view key);

/// `DO RELEASE_LOCK(<wake name>), RELEASE_LOCK(<queue name>)`: a holder's release of both
/// (the queue name is normally given back already; RELEASE_LOCK of a name this session does
/// not hold changes nothing).
Sql release_wake(const Tables& t, std::string_view key);

/// A waiter's block, within `left`: a waiter that does not hold the key's queue name waits for
/// it, and true once it has it (it is then the one to try next); the one that holds it waits
/// until the key's holder gives the wake lock back (true). false when `left` passed, and at
/// once when nobody holds the wake lock (a holder that died, or one that keeps none), so core's
/// backoff takes over; the queue name is then given back. The wake lock is given back in the
/// same statement.
Result<bool> wait_for_wake(Connection& conn, const Tables& t, std::string_view key, Millis left);

/// Gives the key's queue name back: a waiter that held it (wait_for_wake said true) and ends
/// its wait without taking the key or waiting again.
Result<void> leave_queue(Connection& conn, const Tables& t, std::string_view key);

}  // namespace dblock::mysql

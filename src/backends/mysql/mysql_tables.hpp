#pragma once
// What the MySQL backend's pieces share: table names, DDL, and the statements on
// <prefix>locks and <prefix>runs that every strategy uses.

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/mysql/mysql_connection.hpp"

namespace dblock::mysql {

/// Table names for one prefix (validated by core as an identifier), quoted with backticks.
struct Tables {
  std::string prefix;
  std::string locks;
  std::string runs;
  std::string claims;
};
Tables make_tables(const std::string& prefix);

/// The DDL for `dblock schema --dialect mysql`: one statement per element.
std::vector<std::string> schema_statements(const std::string& prefix);

/// Creates missing tables; a table of the wrong shape is ErrorKind::config naming the column.
Result<void> ensure_schema(Connection& conn, const Tables& t);

/// SQL for a DATETIME column (or expression) as ms since the epoch; the session is in UTC.
std::string epoch_ms(const std::string& expr);

/// SQL for the GET_LOCK name of a key: "dblock:" + 57 hex digits of SHA-256 over database,
/// prefix and key, so any valid key fits the server's 64-character limit and two databases
/// on one server never share a lock. The prefix is bound; the key is a column of the row
/// (key_column) or a bound value (key).
Sql advisory_name_of_column(const Tables& t, const std::string& key_column);
Sql advisory_name(const Tables& t, std::string_view key);

/// True when --min-interval lets the key start now (always when it is 0), on the row's
/// last_started_at.
Sql due_condition(std::int64_t min_interval_us);

/// The row of one key with the server's verdict on its holder, or nullopt when no row.
Result<std::optional<LockStatus>> read_lock(Connection& conn, const Tables& t, const std::string& key);
/// Every row (keys empty) or the given keys; a key without a row is reported free.
Result<std::vector<LockStatus>> read_locks(Connection& conn, const Tables& t, std::span<const std::string> keys);

/// The newest `limit` rows of <prefix>runs, of `key` (every key when empty), newest first.
Result<std::vector<RunRecord>> read_history(Connection& conn, const Tables& t, const std::string& key, int limit);

/// Inserts the history row (started_at = the lock's acquired_at for that token) and prunes
/// the key's rows beyond the newest `keep`.
Result<void> write_history(Connection& conn, const Tables& t, const RunRecord& run, int keep);

/// Time until --min-interval has elapsed for the key (0 when due), in database time.
Result<Millis> due_in(Connection& conn, const Tables& t, const std::string& key, Millis min_interval);

/// Lockers (mysql_lease.cpp, mysql_session_strategies.cpp).
Result<std::unique_ptr<Locker>> make_lease_locker(const Dsn& dsn, const BackendOptions& options, Tables t);
Result<std::unique_ptr<Locker>> make_session_locker(Strategy s, const Dsn& dsn, const BackendOptions& options, Tables t);

/// Microseconds, the unit every INTERVAL in our SQL uses.
inline std::int64_t micros(Millis ms) { return ms.count() * 1000; }

}  // namespace dblock::mysql

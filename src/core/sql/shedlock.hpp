#pragma once
// --table-format shedlock (dblock(1), SHEDLOCK): the lease lives in a table of ShedLock, the
// Java scheduler lock, so a cron job and a @SchedulerLock job exclude each other. What the
// three backends share about that table: its limits and its documented columns (each dialect
// writes its documented DDL in its <name>_statements.cpp). Header only.
//
// ShedLock's JDBC provider (JdbcTemplateLockProvider with usingDbTime(), SqlStatementsSource and
// its MySQL / PostgreSQL subclasses in ShedLock 5.x) stores every time as UTC in a TIMESTAMP
// without time zone: MySQL UTC_TIMESTAMP(3), PostgreSQL timezone('utc', CURRENT_TIMESTAMP).
// Each dialect gives the same expression as Dialect::utc_now (rules.hpp), which the statements
// (shedlock_statements.cpp) use, so both sides compare like with like.

#include <array>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace dblock::shedlock {

/// ShedLock's name column is VARCHAR(64): a longer key could not be stored, so it is refused.
inline constexpr std::size_t name_max = 64;

/// The columns ShedLock documents; a table without one is ErrorKind::config naming it.
inline constexpr std::array<std::string_view, 4> columns{"name", "lock_until", "locked_at", "locked_by"};

inline Result<void> check_name(std::string_view key) {
  if (key.size() <= name_max) return {};
  return fail(ErrorKind::usage, "the key '" + std::string(key) + "' is " + std::to_string(key.size()) +
                                    " bytes long; a ShedLock name is at most 64 (--table-format shedlock)");
}

/// SQL over dblock's <prefix>locks row `row` of a name (an alias and its dot, or ""): false while
/// it records an unreleased holder of --table-format shedlock on another ShedLock table than
/// :table (the row's session_id; NULL, from an older dblock: not known, so not refused). ShedLock's
/// row excludes only the holders of its own table.
inline std::string same_table_sql(std::string_view row) {
  const std::string r(row);
  return "NOT (" + r + "strategy = 'shedlock' AND " + r + "released_at IS NULL AND " + r + "session_id IS NOT NULL AND " +
         r + "session_id <> :table)";
}

/// The message of a refused table format / strategy pair (exit 78).
inline constexpr const char* lease_only =
    "--table-format shedlock works only with --strategy lease: a ShedLock row is a lease (lock_until), "
    "which a Java service judges on its own; a session lock would be invisible to it";

}  // namespace dblock::shedlock

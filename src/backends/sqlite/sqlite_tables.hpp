#pragma once
// What the SQLite backend's files share: table names and the statements (sqlite_statements.cpp).
// There is no server clock: each process's wall clock can be stepped by hours (NTP, a VM
// resume, `date -s`), so leases and --min-interval are judged on CLOCK_BOOTTIME and the boot id,
// read in SQL through dblock_boot_ms() / dblock_boot_id(), in integer milliseconds.

#include <string>
#include <vector>
#include <string_view>

#include "backends/sqlite/sqlite_connection.hpp"
#include "core/backend.hpp"
#include "core/sql/identifiers.hpp"
#include "core/sql/statements.hpp"

namespace dblock::sqlite {

/// The tables, made on first use and checked by doctor (core/sql/schema.hpp): dblock's, and
/// ShedLock's with --table-format shedlock.
sql::SchemaStatements schema_statements(const BackendOptions& options);


/// SQL, 1 or 0: the row's lease is live. On CLOCK_BOOTTIME when the boot columns judge it; a
/// lease from another boot is over (its holder did not survive the reboot). A row without them
/// (an older dblock's, or a host without a boot id) falls back to the wall clock, the only rule
/// its writer knew, so a holder still running an older dblock keeps its lease.
std::string lease_live_sql(const std::string& a);

/// The statements of the common lease locker (sqlite_statements.cpp).
sql::LeaseStatements lease_statements(const std::string& prefix);

/// What status, history and `dblock renew` read (sqlite_statements.cpp), for the table format of
/// `options`; a table of an older dblock is read without its boot_* columns (InspectStatements::older).
sql::InspectStatements inspect_statements(const BackendOptions& options);

/// --table-format shedlock: the statements of the common ShedLock locker (sqlite_statements.cpp).
sql::ShedlockStatements shedlock_statements(const BackendOptions& options);

/// `dblock release` of another process's holder (SqlBackend::release): `release` alone, there
/// being no sessions to end.
sql::ReleaseStatements release_statements(const std::string& prefix);

}  // namespace dblock::sqlite

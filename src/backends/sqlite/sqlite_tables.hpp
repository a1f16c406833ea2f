#pragma once
// What the SQLite backend's files share: table names, DDL and the shape check, and the SQL
// that judges a lease. There is no server clock: SQLite's 'now' is each process's own wall
// clock, which NTP, a VM resume or `date -s` can step by hours. So leases and --min-interval
// are judged on CLOCK_BOOTTIME (with the boot id, as that clock restarts at every boot), read
// in SQL through dblock_boot_ms() / dblock_boot_id(); the wall-clock columns stay for display
// and history. Every comparison is in integer milliseconds computed in SQL.

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.hpp"
#include "backends/common/lock_rows.hpp"
#include "backends/common/statements.hpp"
#include "backends/sqlite/sqlite_connection.hpp"

namespace dblock::sqlite {

/// A statement's current row as the common row layer reads it.
class StatementRow final : public rows::ColumnReader {
 public:
  explicit StatementRow(const Statement& stmt) : stmt_(stmt) {}
  bool is_null(int column) const override { return stmt_.is_null(column); }
  std::string text(int column) const override { return stmt_.text(column); }
  std::int64_t int64(int column) const override { return stmt_.int64(column); }

 private:
  const Statement& stmt_;
};

/// Quoted table names for one prefix.
struct Tables {
  explicit Tables(const std::string& prefix)
      : locks(quote_ident(prefix + "locks")), runs(quote_ident(prefix + "runs")) {}
  std::string locks;
  std::string runs;
};

/// The DDL `dblock schema --dialect sqlite` prints; ensure_schema runs the same text.
std::string schema_sql(const std::string& prefix);

/// Creates the tables if missing, then checks their shape: ErrorKind::config naming the
/// table and the missing column when a table exists with another shape. Reads only (no write
/// transaction, no fsync) when the schema is complete; otherwise one transaction. Not inside
/// a caller's transaction.
Result<void> ensure_schema(const Connection& conn, const std::string& prefix);

/// Read only: both tables exist with the expected columns. Missing tables are
/// no_lock_database; a foreign shape is ErrorKind::config; a table from an older dblock
/// without the boot columns says that the next run or `dblock init` adds them.
Result<void> check_schema(const Connection& conn, const std::string& prefix);

/// True when <prefix>locks exists but an older dblock made it without the boot_* columns.
Result<bool> lacks_boot_columns(const Connection& conn, const std::string& prefix);
/// True when <prefix>locks has the slots column (semaphores); an older table gets it from ensure_schema.
Result<bool> has_slots_column(const Connection& conn, const std::string& prefix);
/// A FROM source reading such a table with NULL boot_* columns (the wall-clock rule), for a
/// read-only inspection, which cannot add them.
std::string locks_without_boot_columns(const std::string& prefix);

/// The locker's error path (the run path assumes the tables, backend.hpp): when `failed` may
/// come from a missing table or column and the schema is indeed incomplete, runs
/// ensure_schema and returns true (retry the operation once); false when the schema is
/// complete (`failed` stands). A table of the wrong shape is ErrorKind::config naming the
/// column. Call it outside any transaction.
Result<bool> repair_schema(const Connection& conn, const std::string& prefix, const Error& failed);

/// Database now in epoch ms, as SQL text.
std::string now_ms_sql();

/// SQL: true when the boot_* columns of the row (`a` is "" or an alias with its dot) judge its
/// lease: they belong to its current token (an older dblock that took the row left them stale)
/// and both the row and this process know their boot.
std::string boot_judged_sql(const std::string& a);

/// SQL, 1 or 0: the row's lease is live. On CLOCK_BOOTTIME when the boot columns judge it; a
/// lease from another boot is over (its holder did not survive the reboot). A row without them
/// (an older dblock's, or a host without a boot id) falls back to the wall clock, the only rule
/// its writer knew, so a holder still running an older dblock keeps its lease.
std::string lease_live_sql(const std::string& a);

/// SQL SET list for a renewal by the holder: the boot columns now belong to this boot and token.
/// The start keeps its boot reading only when it was taken on this boot.
std::string renew_boot_sql(std::string_view ttl_param);

/// SELECT ... FROM <prefix>locks of status: the common status columns (common/lock_rows.hpp),
/// whether the lease is live, then `extra` (from column status_columns). The caller appends its WHERE.
std::string status_select(const Tables& t, std::string_view extra = {});
inline constexpr int status_columns = rows::status_column_count + 1;
/// The statements of the common lease locker (sqlite_statements.cpp).
sql::LeaseStatements lease_statements(const std::string& prefix);

/// What status, history and `dblock renew` read (sqlite_statements.cpp), for the table format of
/// `options`; `without_boot_columns`: a table of an older dblock, read without its boot_* columns.
sql::InspectStatements inspect_statements(const BackendOptions& options, bool without_boot_columns = false);

/// --table-format shedlock (sqlite_shedlock.cpp): the statements of the common ShedLock locker
/// (sqlite_statements.cpp), the table itself (created only when missing, shape checked), and
/// status of its rows.
sql::ShedlockStatements shedlock_statements(const BackendOptions& options);
Result<void> ensure_shedlock_table(const Connection& conn, const BackendOptions& options);
/// Status of ShedLock's rows: a SELECT to append `WHERE name = ...` or `ORDER BY name` to.
std::string shedlock_status_select(const BackendOptions& options);
/// Stateless release (`dblock release`) of a ShedLock row: ShedLock's unlock on the named holder
/// (a token names the owner of dblock's row with that token).
Result<void> shedlock_release(const Connection& conn, const BackendOptions& options, const std::string& key,
                              const HolderSelector& who);

}  // namespace dblock::sqlite

#pragma once
// Shared pieces of the postgres backend: table names, schema, history, the lockers' factories.

#include <cstdint>
#include <memory>
#include <string>

#include "backends/backend.hpp"
#include "backends/postgres/postgres_connection.hpp"

namespace dblock::postgres {

/// Quoted table names for one prefix.
struct Tables {
  std::string prefix;
  std::string locks, runs, claims;  // quoted
};
Tables tables_for(const std::string& prefix);

/// The DDL `dblock schema --dialect postgres` prints and ensure_schema runs.
std::string schema_sql(const std::string& prefix);
/// Creates missing tables (serialized by an advisory transaction lock, so concurrent first
/// use cannot fail) and checks every expected column is there (ErrorKind::config otherwise).
Result<void> ensure_schema(Connection& conn, const Tables& t);
/// Read only (doctor): missing tables are no_lock_database, a foreign shape ErrorKind::config.
Result<void> check_schema(Connection& conn, const Tables& t);

/// The advisory lock id of a key: FNV-1a 64 over prefix, a NUL, then the key, as a signed
/// bigint. Stable across versions and hosts; a collision only makes two keys exclude each other.
std::int64_t advisory_key(std::string_view prefix, std::string_view key);

/// SELECT ... FROM <prefix>locks l of status: the common status columns (common/lock_rows.hpp),
/// then the server's verdict on the holder, then `extra` (from column status_columns); binds
/// $1 = the claims table's name. The caller appends its WHERE.
std::string status_select(const Tables& t, std::string_view extra = {}, bool ask_about_sessions = true);
inline constexpr int status_columns = 16;
/// Row `row` of a status_select() result, its state judged (common/lock_rows.hpp).
LockStatus read_status(const QueryResult& r, int row, const Tables& t);

/// The newest `limit` rows of <prefix>runs, of `key` (every key when empty), newest first.
Result<std::vector<RunRecord>> read_history(Connection& conn, const Tables& t, const std::string& key, int limit);

/// The LISTEN/NOTIFY channel a release of this key announces on (raw: pg_notify() takes it as
/// text): one per key, so a release wakes only that key's waiters. A channel name is at most
/// 63 bytes and a key up to 255, so it carries advisory_key's hash; a collision only costs a
/// spurious wake-up.
std::string release_channel(std::string_view prefix, std::string_view key);

/// Runs `attempt` (one statement's worth of work that cleans up after itself on failure) on
/// the assumption that the tables exist. When a statement reports a table missing (SQLSTATE
/// 42P01) the schema is created on `conn` and `attempt` runs once more; a missing column (42703)
/// becomes the config error that names it (the schema check runs only on this error path).
template <class Attempt>
auto with_schema(Connection& conn, const Tables& t, Attempt&& attempt) -> decltype(attempt()) {
  auto r = attempt();
  if (r || (r.error().sqlstate != "42P01" && r.error().sqlstate != "42703")) return r;
  const bool retry = r.error().sqlstate == "42P01";
  if (auto made = ensure_schema(conn, t); !made) return std::unexpected(made.error());
  if (!retry) return r;  // every column is there: the statement's own error stands
  return attempt();
}

/// The tail of one statement that releases and records the run: after the caller's
/// data-modifying CTE `u` (the release UPDATE ... RETURNING name), the history row (when
/// wanted) and the trim of the key's rows beyond the newest `keep`, then
/// `SELECT <rows u changed>, <final_columns>`. The commit need not wait for the disk
/// (synchronous_commit off for this transaction only): a release lost in a server crash only
/// leaves a lease to expire, the history row is a record, and the next acquirer's synchronous
/// commit flushes the WAL up to its own token first.
/// Parameters: $1 key, $2 token; from $first on the eight of append_history_params (history
/// wanted, owner, host, pid, outcome, exit code, keep, strategy); the caller's CTE uses those
/// in between as it likes.
std::string release_tail(const Tables& t, std::string_view final_columns, int first);
/// The eight history parameters of release_tail for `req` (no history: the first is false).
void append_history_params(Params& p, const ReleaseRequest& req, const LockRequest& held, std::int64_t token, Strategy s,
                           int keep);

/// The history row of a run that held `req` with `token`: key, token and strategy come from
/// the locker (core leaves them empty), holder fields from the request when core left them empty.
RunRecord complete_run(RunRecord run, const LockRequest& req, std::int64_t token, Strategy s, bool still_held);

/// A lease renewal: `sql` once, and once more after a reconnect when the connection failed.
Result<QueryResult> exec_reconnecting(Connection& conn, const std::string& sql, const Params& p);

/// Lease locker sharing the backend's connection (reconnects it once when renewing).
std::unique_ptr<Locker> make_lease_locker(std::shared_ptr<Connection> conn, Tables t, int history_keep);

/// --table-format shedlock (postgres_shedlock.cpp): the lease locker on ShedLock's table
/// (sharing the backend's connection), the table itself (created only when missing, shape
/// checked), and status of its rows: a SELECT that binds $1 (any text) and ends in WHERE ... AND,
/// to which the caller appends its condition on name, and its rows.
std::unique_ptr<Locker> make_shedlock_locker(std::shared_ptr<Connection> conn, const BackendOptions& options, Tables t);
Result<void> ensure_shedlock_table(Connection& conn, const BackendOptions& options);
std::string shedlock_status_select(const BackendOptions& options, const Tables& t);
LockStatus read_shedlock_status(const QueryResult& r, int row);
/// Stateless renew/release (`dblock renew` / `release`) of a ShedLock row: ShedLock's extend and
/// unlock on the named holder (a token names the owner of dblock's row with that token).
Result<std::int64_t> shedlock_renew(Connection& conn, const BackendOptions& options, const Tables& t,
                                    const std::string& key, const HolderSelector& who, Millis ttl);
Result<void> shedlock_release(Connection& conn, const BackendOptions& options, const Tables& t,
                              const std::string& key, const HolderSelector& who);

/// advisory / for-update / txn-insert on the holder session `holder`; for-update and
/// txn-insert open a second, autocommit connection for the token bookkeeping (committed
/// independently of the held transaction).
Result<std::unique_ptr<Locker>> make_session_locker(Strategy s, std::shared_ptr<Connection> holder, const Dsn& dsn,
                                                   const BackendOptions& options, Tables t);

/// Milliseconds as a bound parameter.
inline Param ms_param(Millis m) { return std::to_string(m.count()); }

}  // namespace dblock::postgres

#pragma once
// Shared pieces of the postgres backend: table names, schema, history, the lockers' factories.

#include <cstdint>
#include <memory>
#include <string>

#include "backends/backend.hpp"
#include "backends/common/identifiers.hpp"
#include "backends/common/statements.hpp"
#include "backends/postgres/postgres_connection.hpp"

namespace dblock::postgres {

/// Quoted table names for one prefix.
struct Tables {
  std::string prefix;
  std::string locks, runs, claims;  // quoted
};
Tables tables_for(const std::string& prefix);

/// The tables, made on first use and checked by doctor (common/schema.hpp): dblock's, and
/// ShedLock's with --table-format shedlock (postgres_statements.cpp).
sql::SchemaStatements schema_statements(const BackendOptions& options);
/// common/schema.hpp's ensure_schema on `conn`, for the session strategies' bookkeeping.
Result<void> ensure_schema(Connection& conn, const Tables& t);

/// SQL, over the <prefix>locks row aliased `row`: the server's evidence that its session_id
/// (a backend pid, which the server reuses) holds that row's key, as text for session_holds_sql:
/// the session's advisory locks in the strategy's form (advisory, txn-insert), or that it runs
/// the open transaction which locked the key's claims row (for-update); NULL for none.
std::string session_verdict(const Tables& t, std::string_view row);
/// Whether session_verdict's text shows the lock of the key, in SQL; status and `release --force`
/// both judge the holder by this: `strategy`, `verdict`, and `hi` and `lo`, the halves of the key's
/// key_hash (as session_verdict shows them), are SQL expressions.
std::string session_holds_sql(std::string_view strategy, std::string_view verdict, std::string_view hi,
                              std::string_view lo);

/// Runs `attempt` (one statement's worth of work that cleans up after itself on failure) on
/// the assumption that the tables exist. When a statement reports a table (SQLSTATE 42P01) or a
/// column (42703) missing, ensure_schema runs on `conn` and `attempt` runs once more: it creates
/// missing tables, adds the slots column a table from before semaphores lacks, and makes a
/// missing required column the config error that names it. Both errors come from planning, so
/// the failed attempt changed nothing; a column still missing after that is the retry's error.
template <class Attempt>
auto with_schema(Connection& conn, const Tables& t, Attempt&& attempt) -> decltype(attempt()) {
  auto r = attempt();
  if (r || (r.error().sqlstate != "42P01" && r.error().sqlstate != "42703")) return r;
  if (auto made = ensure_schema(conn, t); !made) return std::unexpected(made.error());
  return attempt();
}

/// The tail of one statement that releases and records the run: after the caller's
/// data-modifying CTE `u` (the release UPDATE ... RETURNING name), the history row (when
/// wanted) and the trim of the key's rows beyond the newest `keep`, then
/// `SELECT <rows u changed>, <final_columns>`. The commit need not wait for the disk
/// (synchronous_commit off for this transaction only): a release lost in a server crash only
/// leaves a lease to expire, the history row is a record, and the next acquirer's synchronous
/// commit flushes the WAL up to its own token first.
/// Parameters: $1 key, $2 token; from $first on the nine of append_history_params (history
/// wanted, owner, host, pid, outcome, exit code, keep, strategy, the history's name: the key,
/// or a semaphore slot's key); the caller's CTE uses those in between as it likes.
std::string release_tail(const Tables& t, std::string_view final_columns, int first);
/// The nine history parameters of release_tail for `req` (no history: the first is false).
void append_history_params(Params& p, const ReleaseRequest& req, const LockRequest& held, std::int64_t token, Strategy s,
                           int keep);

/// Sample values for those nine, for a warm-up of the release (planned, never run) of a run
/// that will hold `held`.
void append_sample_history_params(Params& p, const LockRequest& held, Strategy s, int keep);

/// The history row of a run that held `req` with `token`: key, token and strategy come from
/// the locker (core leaves them empty), holder fields from the request when core left them empty.
RunRecord complete_run(RunRecord run, const LockRequest& req, std::int64_t token, Strategy s, bool still_held);

/// Semaphores (src/backends/README.md, "Semaphores"): the CTEs `f` and `h` that a slot's
/// acquiring statement starts with (after its own leading CTEs, if any). f: one row, `free` =
/// `slot_free`, whether the slot's row can be taken, judged as the slot's own upsert will judge
/// it, in the same snapshot. h: the header row K, taken only when f.free and the header allows it
/// (its count is N; or it is a plain row nobody holds; or no slot of K is held), inserted with
/// token 1 or updated to token + 1, RETURNING token: the slot's upsert takes it `FROM h`.
/// Parameters: $2 owner, $3 host, $4 pid; from $first on the four of append_semaphore_params.
std::string semaphore_header_ctes(const Tables& t, std::string_view slot_free, int first);
/// K, N, and the bounds of K's slot rows' names (K + '\x1f', K + '\x20').
void append_semaphore_params(Params& p, const LockRequest& req);
/// The name of the row that refused when the slot was not taken: the header when the slot was
/// free (f.free), else the slot's. `first` as for semaphore_header_ctes.
std::string semaphore_refuser(int first);
/// A column of the slot's statement that fails it when the header was taken and the slot (CTE
/// `a`) was not: someone took the slot between the snapshot and the upsert. The error (SQLSTATE
/// 22012) rolls the whole statement back, so no token is used; the answer is busy.
inline constexpr std::string_view semaphore_guard = "1 / CASE WHEN h.token IS NOT NULL AND a.token IS NULL THEN 0 ELSE 1 END";
inline bool slot_taken_meanwhile(const Error& e) { return e.sqlstate == "22012"; }

/// The statements of the lease strategy (src/backends/common/lease_locker.cpp), whole, for the
/// tables of `prefix` (postgres_statements.cpp).
sql::LeaseStatements lease_statements(const std::string& prefix);

/// --table-format shedlock: the statements of the common ShedLock locker (postgres_statements.cpp).
sql::ShedlockStatements shedlock_statements(const BackendOptions& options);

/// status, history, the clock, slot counts and `dblock renew` (common/inspect.hpp), for the
/// table format of `options` (postgres_statements.cpp).
sql::InspectStatements inspect_statements(const BackendOptions& options);

/// advisory / for-update / txn-insert on the holder session `holder`; for-update and
/// txn-insert open a second, autocommit connection for the token bookkeeping (committed
/// independently of the held transaction).
Result<std::unique_ptr<Locker>> make_session_locker(Strategy s, std::shared_ptr<Connection> holder, const Dsn& dsn,
                                                   const BackendOptions& options, Tables t);

/// Milliseconds as a bound parameter.
inline Param ms_param(Millis m) { return std::to_string(m.count()); }

}  // namespace dblock::postgres

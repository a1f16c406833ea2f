#pragma once
// What the MySQL backend's pieces share: table names, DDL, and the statements on
// <prefix>locks and <prefix>runs that every strategy uses.

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.hpp"
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

/// SQL for a DATETIME column (or expression) as ms since the epoch; the session is in UTC.
std::string epoch_ms(const std::string& expr);

/// SQL for the GET_LOCK name of a key: "dblock:" + 57 hex digits of SHA-256 over database,
/// prefix and key, so any valid key fits the server's 64-character limit and two databases
/// on one server never share a lock. The prefix is bound; the key is a column of the row
/// (key_column) or a bound value (key).
Sql advisory_name_of_column(const Tables& t, const std::string& key_column);
Sql advisory_name(const Tables& t, std::string_view key);
/// SQL for the name a for-update or txn-insert holder keeps with GET_LOCK on its lock session
/// while it holds the key: "dblock-held:" + 20 hex digits of the key's hash + `tag`, the
/// session's random 32 hex digits. The server shows who holds it (IS_USED_LOCK), so status and
/// `release --force` find the holder from the server's lock state, not from a connection id
/// (which the server reuses after a restart); and the name holds the key's hash, so a tag
/// copied from another key's row names nothing anyone holds.
Sql holder_tag(const Tables& t, std::string_view key, std::string_view tag);
/// SQL, over a <prefix>locks row, for the lock that proves its session strategy's holder: the
/// advisory name, or the holder tag's name from the tag in session_id; NULL for anything else.
Sql holder_lock_of_row(const Tables& t);
/// SQL, over a <prefix>locks row: the recorded session's connection id when the server shows
/// that session holding holder_lock_of_row, else NULL. One check for status and release.
Sql holder_of_row(const Tables& t);

/// True when --min-interval lets the key start now (always when it is 0), on the row's
/// last_started_at.
Sql due_condition(std::int64_t min_interval_us);

/// The row of one key with the server's verdict on its holder, or nullopt when no row.
Result<std::optional<LockStatus>> read_lock(Connection& conn, const Tables& t, const std::string& key);

/// Inserts the history row (started_at = the lock's acquired_at for that token) and prunes
/// the key's rows beyond the newest `keep`. `lock_row`: the row the lock was held on when it
/// is not the run's key (a semaphore's slot row); empty: the key's.
Result<void> write_history(Connection& conn, const Tables& t, const RunRecord& run, int keep,
                           std::string_view lock_row = {});

/// The statements write_history runs, for callers that run them inside a larger one: the
/// insert (its outcome column given as SQL) and the pruning of the key's rows beyond `keep`.
Sql history_insert(const Tables& t, const RunRecord& run, const Sql& outcome, std::string_view lock_row = {});
Sql history_prune(const Tables& t, const std::string& key, int keep);
/// The same trim as a block for inside a compound statement (BEGIN NOT ATOMIC ... END).
Sql history_prune_block(const Tables& t, const std::string& key, int keep);

/// Inside a compound statement (BEGIN NOT ATOMIC, after its variables): an error rolls back
/// the block's transaction and is passed on unchanged (errno and SQLSTATE). The block then
/// says "START TRANSACTION; ", so its statements up to COMMIT reach the disk in one log flush.
inline constexpr std::string_view rollback_on_error = "DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END; ";

/// Time until --min-interval has elapsed for the key (0 when due), in database time.
Result<Millis> due_in(Connection& conn, const Tables& t, const std::string& key, Millis min_interval);

/// The statements of the common lease locker, ShedLock locker and inspection (mysql_statements.cpp).
sql::LeaseStatements lease_statements(const std::string& prefix, bool mariadb);
sql::ShedlockStatements shedlock_statements(const BackendOptions& options);
sql::InspectStatements inspect_statements(const BackendOptions& options);

/// The session strategies' locker (mysql_session_strategies.cpp). `conn` is the Backend's
/// connection, which the locker takes over (nullptr: it opens its own).
Result<std::unique_ptr<Locker>> make_session_locker(Strategy s, const Dsn& dsn, const BackendOptions& options, Tables t,
                                                    std::unique_ptr<Connection> conn);

/// The run path assumes the schema (backend.hpp, make_locker). After `failed`: when a table or
/// column is missing (Session::schema_missing) completes the schema (common/schema.hpp) and
/// returns success, so the caller retries once; any other error comes back as it was.
Result<void> repair_schema(Connection& conn, const Tables& t, const Error& failed);

/// Runs `attempt` (one lock operation's statements), and once more after repair_schema created
/// a missing schema.
template <class F>
auto with_schema(Connection& conn, const Tables& t, F&& attempt) -> decltype(attempt()) {
  auto first = attempt();
  if (first) return first;
  if (auto r = repair_schema(conn, t, first.error()); !r) return std::unexpected(r.error());
  return attempt();
}

/// SQL for the name of the GET_LOCK a lease holder keeps while it holds the key, so waiters can
/// block on it until the release instead of polling: "dblock-wake:" + 52 hex digits of the
/// same hash as advisory_name (64 characters, the server's limit).
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

/// How long taking a lock over may wait for its wake lock, in seconds: a waiter holds the name
/// only for the instant between its wake-up and its release of it.
inline constexpr double wake_grab_s = 0.1;

/// The new token for a takeover statement that also takes the key's wake lock and gives its
/// queue name back: LAST_INSERT_ID(token + 1), the locks' results discarded (a holder without
/// the wake lock only makes its waiters fall back to polling). A semaphore's slot row:
/// LAST_INSERT_ID(header_token).
Sql next_token_taking_wake(const Tables& t, std::string_view key, std::optional<std::int64_t> header_token = {});

/// Takes the key's wake lock on this connection and gives the queue name back (a holder whose
/// takeover statement could not).
Result<void> take_wake(Connection& conn, const Tables& t, std::string_view key);

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

/// The start of a holder's upsert of its row, up to the token's value: "INSERT INTO locks
/// (name, ..., last_started_at) VALUES (key, owner, host, pid, <token>" where the token is 1
/// for a new row, or for a semaphore's slot row the one its header just issued. The caller
/// adds the other values (strategy ... last_started_at) and the ON DUPLICATE KEY UPDATE.
Sql holder_insert(const Tables& t, const LockRequest& req, std::optional<std::int64_t> header_token);

/// "column = IF(cond, value, column)": the assignments of a conditional upsert.
Sql assign_if(const Sql& cond, const std::string& column, const std::string& value);

/// Semaphores (src/backends/README.md "Semaphores"): taking a slot is one transaction on one
/// connection, the header row of req.semaphore first, then the slot row req.key.
/// START TRANSACTION and the header's upsert: the new token when it was taken (the transaction
/// left open for the slot row), nullopt when not (rolled back). An error rolls back too.
Result<std::optional<std::int64_t>> begin_slot(Connection& conn, const Tables& t, const LockRequest& req);
/// COMMIT (true) or ROLLBACK (false) of the transaction begin_slot opened; a failed COMMIT is
/// rolled back by the server.
Result<void> end_slot(Connection& conn, bool commit);
/// The answer when begin_slot did not take the header: busy with recorded_slots (the header
/// records another count) or with the plain holder of req.semaphore.
Result<AcquireOutcome> header_busy(Connection& conn, const Tables& t, const LockRequest& req);
/// Inside a release's transaction (a compound statement), before anything else: for a
/// semaphore's slot row, lock its header row (FOR UPDATE) until the COMMIT, so the releases of
/// one semaphore's slots take turns. Each inserts into and prunes the key's history rows, and
/// two such transactions at once deadlock on each other's new row; acquirers lock the header
/// first too, so the order is always header, slot row, history. Empty for a plain key's row.
Sql lock_header_of(const Tables& t, std::string_view lock_row);

/// The count the header row of `key` records; 0 for any other row, no row, or a table without
/// the column (no semaphore can exist there). Read only.
Result<int> read_slot_count(Connection& conn, const Tables& t, const std::string& key);

/// Microseconds, the unit every INTERVAL in our SQL uses.
inline std::int64_t micros(Millis ms) { return ms.count() * 1000; }

}  // namespace dblock::mysql

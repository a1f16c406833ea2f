#pragma once
// The statements of the strategies of this folder, each whole: written in a dialect's
// <name>_statements.cpp, or once in core over the dialect's expressions (rules.hpp: the
// lease's, ShedLock's, inspection's, `dblock release`'s). Each comment is the statement's
// contract: the named parameters it may use (it may ignore some) and what it answers. Times are epoch milliseconds on the
// database's clock (SQLite: see sqlite_statements.cpp); the 14 "status columns" are those of
// rows::decode_status (lock_rows.hpp), in its order.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.hpp"
#include "core/sql/failover.hpp"
#include "core/sql/sql_session.hpp"

namespace dblock::sql::tables {
struct Column;
}

namespace dblock::sql {

/// The history of runs in <prefix>runs.
struct HistoryStatements {
  /// :name :token :owner :host :pid :strategy :started_ms :outcome :exit_code. One history row
  /// (finished_at = now).
  Statement add;
  /// :name. Rows: none or (token) of the oldest history row of :name (the least id).
  Statement oldest;
  /// :name :keep. Deletes the rows of :name beyond the newest :keep.
  Statement trim;
  /// `add`'s parameters and :keep (at least 1) :slack. `add`, and `oldest` and `trim` as record_run runs them
  /// (the trim once the oldest row's token is more than :keep + :slack below :token), in one
  /// statement that commits alone without waiting for the disk: a run's history row after its
  /// release costs one round trip. Empty: the three in a begin_release transaction.
  Statement record;
};

struct LeaseStatements {
  /// Opens a write transaction (SQLite: BEGIN IMMEDIATE, so it never upgrades a read lock).
  std::string begin;
  /// Opens a release's transaction. Only the acquisition must survive a crash (it carries the
  /// token): a dialect may let this one commit without waiting for the disk.
  std::string begin_release;

  /// :key :owner :host :pid :ttl_ms :min_interval_ms :token (NULL, or a semaphore slot's token
  /// from its header) :fence (failover.hpp). Takes the row of :key when its lease is over
  /// (expired, released or never taken), it records no other strategy's holder
  /// (rows::strategy_allows_sql, mine 'lease') and, when :min_interval_ms > 0, its last start is
  /// at least that long ago: the holder columns, token (:token, else the greater of the old token
  /// (0 for a new row) and the fence, + 1), strategy 'lease', no session_id, acquired_at =
  /// renewed_at = last_started_at = now, expires_at = now + :ttl_ms, released_at NULL.
  /// Answers as the dialect can (core judges by the answer, lock_steps.hpp): no rows, affected
  /// 1 when taken and 0 when not; or (token, acquired_ms, expires_ms) of the taken row, none when
  /// not; or always one row: those three (NULLs when not taken; the two times NULL too when the
  /// refusal's columns are the row as the take left it, taken, which has them), then `refusal`'s
  /// columns (all NULL: no row), read in the take's own snapshot, then stale: 1 when the failover
  /// record names another incarnation than the server's (a holder's refusal then does not stand
  /// alone: the lock-delay starts at this first contact, failover::admit). A take that binds
  /// :record reads the failover gate itself (rules.hpp, failover_open_sql): it grants nothing while
  /// the gate is closed and numbers above the record's fence (it ignores :fence); core admits the
  /// gate before any other take (failover::admit_once), whose :fence it gives.
  Statement take;
  /// :key :owner. (token, acquired_ms, expires_ms) of the row, for a dialect whose `take` returns
  /// no rows.
  Statement taken;
  /// Session strategies (session_locker.hpp), whose server lock on :key this process holds, so
  /// the row is taken whoever it names. :key :owner :host :pid :strategy :session_id
  /// :min_interval_ms :token (NULL, or a semaphore slot's token from its header) :fence (the
  /// failover fence, failover.hpp). Numbers the row of :key: the holder columns, token (:token,
  /// else :fence + 1 for a new row and the greater of token and :fence, + 1, for an old one), strategy :strategy, session_id :session_id, acquired_at = renewed_at = last_started_at
  /// = now, expires_at and released_at NULL; unless :min_interval_ms > 0 and its last start is
  /// less than that long ago, a --min-hold of its last holder still runs (a released row's
  /// expires_at ahead, Dialect::lease_live), the row is a semaphore's header (strategy 'semaphore'), or it
  /// records another strategy's holder (rows::strategy_allows_sql, mine :strategy). affected
  /// and rows as `take`.
  Statement session_take;
  /// :key :min_interval_ms. Why `take` did not take it: the 14 status columns (NULL for the
  /// last run's and the renewal's, which a refusal does not read: rows::refusal_select_list),
  /// then live (1 when the lease is running), then due_in_ms (read with --min-interval only:
  /// NULL or <= 0 when it allows a start).
  Statement refusal;
  /// :key :owner :token :ttl_ms :record. expires_at = now + :ttl_ms, renewed_at = now, when the
  /// row is still that holder's and not released. affected: 1 renewed, 0 not ours any more.
  /// Renewed, one row (stale) where the dialect can, as `take`'s, so a holder's renewal on a new
  /// primary starts the lock-delay (failover::notice) at no cost otherwise; a renewal that
  /// answers no rows is followed by a read of the record once its connection was made again.
  Statement renew;
  /// :key :owner :token :min_hold_ms :finished (1: set last_finished_at = now and last_exit_code
  /// = :exit_code) :channel (the wake-up name, release_channel). released_at = now and
  /// expires_at = the later of now and acquired_at + :min_hold_ms, when the row is still that
  /// holder's and not released. affected: 1 released, 0 not ours any more. A release that binds
  /// :channel tells the waiters itself and, run alone (autocommit), commits without waiting for
  /// the disk (Dialect::release_returns): a lease's release then commits, and wakes the key's
  /// waiters, before the run's history row is written on its own (lock_steps.hpp,
  /// release_tells); otherwise (SQLite: a commit of its own would cost a second fsync; MySQL:
  /// every commit waits for the disk) the two share a begin_release transaction.
  Statement release;
  /// `release`'s parameters, HistoryStatements::record's (the run's owner, host, pid and
  /// exit code as :run_owner :run_host :run_pid :run_exit_code; :outcome the run's when the row was still the holder's) and
  /// :keep (at least 1) :slack: `release` and, in the same statement, the run's history row as
  /// HistoryStatements::record writes it, its outcome 'lost' when the release found the row no
  /// longer the holder's. Rows: one, whose first column core reads (1 released, 0 not ours any
  /// more); a dialect may answer more after it (PostgreSQL's and MariaDB's also say whether the
  /// row was ours, MariaDB's the wake and queue names given back). A lease run then costs its
  /// take and this. Empty: the release, then the history row.
  Statement release_recorded;
  /// The history of runs, written by core (rules.hpp, history_statements) in the dialect's
  /// expressions.
  HistoryStatements history;

  /// Semaphores (docs/backend-contract.md, "Semaphores"), inside `begin`'s transaction.
  /// :key (the semaphore) :owner :host :pid :slots :first :past (the bounds of its slot rows'
  /// names) :recount. Takes the header row of :key, bumping its token (1 for a new row), when it
  /// records :slots, or it is a plain row nobody holds, or, with :recount = 1, no slot row of it
  /// is held. affected and rows as `take` (its times may be NULL); the token as `take`'s, above :fence. Taken or not,
  /// the row stays locked until the transaction ends: core asks with :recount = 1 only in a
  /// later statement (take_header, lock_steps.hpp), so the slot rows are read after the lock.
  Statement header_take;
  /// :key. Why `header_take` did not take it: the 14 status columns as `refusal`'s, live, then slots.
  Statement header_refusal;
  /// :key. Locks the row until the transaction ends (a slot's release locks its header first,
  /// the order acquirers use, so two releases of one semaphore never deadlock).
  Statement lock_row;

  /// The failover lock-delay (failover.hpp); all empty where the dialect has none.
  FailoverStatements failover;
};

}  // namespace dblock::sql

namespace dblock::sql {

/// --table-format shedlock (dblock(1), SHEDLOCK; shedlock.hpp): the lease is a row of ShedLock's
/// table, taken, extended and unlocked as ShedLock's JDBC provider does, in database time
/// (written once, in core: rules.hpp, shedlock_statements);
/// dblock's own <prefix>locks row of the same name carries the fencing token (bumped in the same
/// transaction) and <prefix>runs the history (LeaseStatements::history).
struct ShedlockStatements {
  /// Opens a write transaction.
  std::string begin;
  /// :key :owner :ttl_ms. ShedLock's acquire: inserts the row, or takes over one whose lock_until
  /// has passed (lock_until = now + :ttl_ms, locked_at = now, locked_by = :owner); a row that
  /// the table's collation finds for :key but that is spelled otherwise is left alone. affected:
  /// 1 when taken. Rows: none or (lock_until_ms).
  Statement take;
  /// :key :owner :host :pid :table (ShedLock's table) :ttl_ms. dblock's row of the name: the
  /// holder, token + 1 (1 when new), strategy 'shedlock', session_id :table, acquired_at =
  /// renewed_at = last_started_at = now, expires_at and released_at NULL (and a dialect's own
  /// lease of :ttl_ms, see `extend_own`); unless it records another strategy's holder
  /// (rows::strategy_allows_sql, mine 'shedlock') or an unreleased one on another ShedLock
  /// table (shedlock::same_table_sql): affected 0. Rows: none or (token, acquired_ms).
  Statement number;
  /// :key :owner. (token, acquired_ms) of dblock's row, for a dialect whose `number` returns none;
  /// empty otherwise.
  Statement numbered;
  /// :key. The holder of ShedLock's row: name, locked_by, locked_at_ms, lock_until_ms, now_ms,
  /// dblock's token of the name (0 when none), and its host and pid when its owner is locked_by.
  Statement holder;
  /// :key :owner :token :ttl_ms. ShedLock's extend: lock_until = now + :ttl_ms while it is ahead,
  /// locked_by is :owner and dblock's row of the name still has :token (two hosts given one
  /// --owner: the one whose lease passed must not extend the other's). affected: 1 extended.
  Statement extend;
  /// :key :owner :token :ttl_ms. For a dialect whose `take` also honours a lease of its own in
  /// dblock's row (SQLite: on CLOCK_BOOTTIME, which a wall-clock step cannot move): that lease
  /// extended, in one transaction with `extend`. Empty: none.
  Statement extend_own;
  /// :key :owner :token :min_hold_ms. ShedLock's unlock: lock_until = the later of now and
  /// locked_at + :min_hold_ms (lockAtLeastFor), on name and locked_by, and while dblock's row of
  /// the name has :token (NULL: whatever it has). affected: 1 unlocked.
  Statement unlock;
  /// :key :token :finished :exit_code :min_hold_ms. dblock's row of the token: released_at = now
  /// and, when :finished, last_finished_at = now and last_exit_code = :exit_code (a lease of the
  /// dialect's own ends at the later of now and its start + :min_hold_ms).
  Statement finish;
  /// :key :owner :token (either may be NULL) :force. `dblock release` from another process: the
  /// row's (locked_by) when the named holder's lock is ahead (a token names the owner of
  /// dblock's row with that token), or with :force whoever locked it; none otherwise.
  Statement named_holder;
  /// :key :owner. dblock's unreleased 'shedlock' row of that owner: released_at = now.
  Statement released;
};

}  // namespace dblock::sql

namespace dblock::sql {

/// What status, history, `dblock renew` and doctor read (inspect.hpp), per table format; written
/// once, in core (rules.hpp, inspect_statements).
struct InspectStatements {
  /// Every row: the 14 status columns, live (1: the lease is running), session_holds (1: the
  /// server says the recorded session still holds the key; 0 where there are no sessions),
  /// ordered by name. ShedLock: ShedlockStatements::holder's columns instead.
  Statement status_all;
  /// :keys (a JSON array of names). The same, for those keys' rows only.
  Statement status_keys;
  /// :limit. The history columns (rows::history_select_list), newest first.
  Statement history_all;
  /// :name :limit. The same, of one key.
  Statement history_of;
  /// The database clock: (now_ms).
  Statement now_ms;
  /// :key. (slots) of a semaphore's header row; no row, or NULL, for anything else.
  Statement slot_count;
  /// :key :owner :token (either may be NULL) :ttl_ms. A renewal from another process of the
  /// named holder's unreleased lease: expires_at = now + :ttl_ms. Rows: (expires_ms), none when
  /// no such holder (or, for a dialect with `renewed`, none; affected: 1 renewed, 0 no such holder).
  Statement renew_named;
  /// :key :owner :token. (expires_ms) of the row renew_named renewed, for a dialect whose
  /// renew_named returns no rows (Dialect::returning); empty otherwise.
  Statement renewed;
  /// :key :owner :token :ttl_ms. --table-format shedlock on a dialect whose ShedLock lease is
  /// also one of its own in dblock's row (ShedlockStatements::extend_own): that lease extended
  /// after renew_named renewed. Empty: none.
  Statement renew_own;
  /// The same for tables an older dblock made, which lack `required` added columns
  /// (SchemaStatements::added) that inspection does not add: status and history read the rows
  /// as that dblock wrote them (SqlBackend::older_statements), each older shape's `older` the
  /// shape before it (tables.hpp, older_shapes). null: no required column came after the first.
  std::shared_ptr<const InspectStatements> older;
  /// For an `older` one: the columns its tables lack, (table, column), unquoted.
  std::vector<std::pair<std::string, std::string>> lacks;
};

}  // namespace dblock::sql

namespace dblock::sql {

/// `dblock release` of another process's holder (sql_backend.hpp, release_held); `holder` and
/// `release` written once, in core (rules.hpp, release_statements). `holder` and `release` take :key :owner :token (either may be NULL) :force (1: whoever holds it) :channel
/// (the wake-up name, release_channel).
struct ReleaseStatements {
  /// Before `release`, for a dialect whose `release` returns no rows: the row's (session, lock)
  /// as `release` would return them.
  Statement holder;
  /// Marks the named holder's unreleased row (:force: any holder's, a --min-hold still running
  /// included) released, a running lease's or --min-hold's expires_at now. affected: the rows marked. Rows: none, or (session, lock):
  /// the server session that holds the row's key, when the server shows it holding that key's
  /// lock (as status judges it; NULL otherwise), and the dialect's name of that lock.
  Statement release;
  /// :session :lock. Ends the session, only while it still holds :lock; empty where `release`
  /// ended it already.
  Statement end_session;
  /// :session :lock :key. (1) once the session is gone or the lock free, else (0): core's, the
  /// server no longer showing :session holding :key's lock (Dialect::session_holds), unless the
  /// dialect writes its own. An end_session that fails with ErrorKind::no_session found the
  /// session ended by itself meanwhile.
  Statement session_gone;
};

}  // namespace dblock::sql

namespace dblock::sql {

/// One privilege a strategy needs on one table, for doctor (dblock(1) PRIVILEGES): a statement
/// that needs it and nothing else (it reads no column, so no SELECT comes with an UPDATE).
struct PrivilegeProbe {
  std::string privilege;  // SELECT, INSERT, UPDATE or DELETE
  std::string table;      // unquoted
  std::string why;        // what needs it, for the message
  enum class Needed { always, claims, for_update, shedlock } needed = Needed::always;
  Statement statement;
};

/// doctor's checks of a server (sql_backend.hpp, doctor_checks).
struct DoctorStatements {
  /// (the server's name and version), for the "server" line.
  Statement server;
  /// :probe (a name no key can have). One privilege each (privilege_probes), each in a
  /// LeaseStatements::begin transaction of its own, rolled back; one that fails with
  /// ErrorKind::denied wants the privilege, not something else.
  std::vector<PrivilegeProbe> probe;
  /// May the first run or `dblock init` make missing tables: a CREATE TABLE always refused, for
  /// its column named twice (ErrorKind::other) where it may, else denied or config (no schema).
  Statement can_create;
  /// :session (1: the strategy asked about is a session strategy) :strategy. Rows of (name, ok
  /// (1 or 0), detail): the server's settings, read and judged. One that fails is a failed
  /// check named by the statement's id.
  std::vector<Statement> checks;
  /// (the server's id of the session that runs it), as Session::started_id gives it: doctor's
  /// pooler check (pooler.hpp). Empty: the dialect has no server session (no check).
  Statement session_id;
};

/// DoctorStatements::probe in standard SQL: every privilege of every strategy on the tables of
/// `options` (ShedLock's with --table-format shedlock), names quoted with `quote`.
std::vector<PrivilegeProbe> privilege_probes(const BackendOptions& options, char quote);

}  // namespace dblock::sql

namespace dblock::sql {

/// The tables (schema.hpp): made on first use, read by doctor.
struct SchemaStatements {
  /// The names from `options` (ShedLock's table only with --table-format shedlock).
  SchemaStatements(const BackendOptions& options, std::string_view dialect_name)
      : prefix(options.table_prefix),
        shedlock_table(options.shedlock ? options.shedlock_table : std::string()),
        dialect(dialect_name) {}

  /// Unquoted table names: `prefix` + locks, runs (and claims, where `create` makes it: the
  /// session strategies' table); ShedLock's table, empty without --table-format shedlock.
  std::string prefix;
  std::string shedlock_table;
  /// The dialect's name, for `dblock schema --dialect` in messages.
  std::string dialect;

  /// Each CREATE ... IF NOT EXISTS, whole, in order, with the table it makes (or indexes),
  /// unquoted: `dblock schema` prints them all; ensure_schema runs those of the tables missing,
  /// never one of a table that exists (the user of a DBA's tables may not create).
  struct Create {
    std::string table;
    std::string sql;
  };
  std::vector<Create> create;
  /// Whether `create` makes `table`: the tables the dialect's statements use, and so those
  /// check_schema asks for.
  bool makes(std::string_view table) const {
    for (const Create& c : create)
      if (c.table == table) return true;
    return false;
  }
  /// For `dblock schema` only (empty: none): the failover record (failover.hpp) as a statement
  /// that makes it once, for the server the script runs on, after any comment lines of its own
  /// ("-- ..."; the script's comment about the record comes before them).
  std::string failover_record;
  /// Opens the transaction the DDL runs in; empty: each DDL statement commits on its own.
  std::string begin;
  /// Columns that came after a table's first shape (tables.hpp), in the order they came: the
  /// table (unquoted), the column's name, the ALTER TABLE that adds it to an older table, and the
  /// column as tables.hpp (or the dialect's SchemaDialect::own_columns) describes it, never null:
  /// whether check_schema asks for it too (Column::required), or only what uses it does (a
  /// semaphore's `slots`).
  struct Added {
    std::string table;
    std::string column;
    std::string add;
    const tables::Column* described = nullptr;
  };
  std::vector<Added> added;
  /// :locks :runs :claims :shedlock (table names, unquoted; '' for none). For the tables that
  /// exist, one row per column: (table, column, NULL, fits, type), fits 0 when a column name or
  /// token has a type that cannot hold every name (255 bytes of text; ShedLock's any text) or
  /// token (64-bit integer), else 1 or NULL; and one row per column of each unique key (primary
  /// key, unique index or constraint; not partial, not deferred): (table, column, key's name,
  /// NULL, NULL), column NULL or '' for an expression or a prefix of a column. Where one database
  /// has several namespaces that a connection picks by a setting (PostgreSQL's search_path), and
  /// only where its DDL runs in a transaction (`begin`: the read after the DDL refuses it), also
  /// a row (table, NULL, namespace, NULL, this connection's namespace) for :locks and :shedlock in
  /// each other namespace, which a connection set otherwise would lock with (none where the DSN
  /// names the tables).
  Statement columns;
};

}  // namespace dblock::sql

namespace dblock::sql {

/// A lease waiter's queue on a key's session lock (rules.hpp, queue_statements): at its head,
/// the waiter listens for the holder's release; the others wait for their turn. `wait` takes the
/// queue's lock within :lock_timeout (the dialect's lock-not-available error once the wait is
/// over); `leave` gives it back. `wait_ahead`: `wait` of the holder's handoff lock (:hand, taken
/// with the holder's row and let go with its release), which the head sends ahead of its lease
/// take in one round trip (Waiters::ahead, Session::run_behind): the release lets the take run.
struct QueueStatements {
  Statement wait, leave, wait_ahead;
};

/// Waiters that hear a release through session locks alone (rules.hpp, wake_statements; MySQL's
/// NamedLockWake), on two locks of a key that the session binds from :key: a holder keeps the
/// key's wake lock (:wake) while it holds the key, and the one waiter that holds the key's queue
/// lock (:queue) waits for the wake lock; the other waiters wait for the queue lock. So a release
/// wakes one waiter, not all of them. The wake lock is taken without waiting: a semaphore's
/// slots share one. wake_hold: the wake lock taken, the queue lock given back (the waiter became
/// the holder); wake_release: both given back. wake_wait: within :wait_ms, true once this waiter
/// holds the queue lock (the next to try) or, holding it, once the holder gave the wake lock
/// back; false at once when nobody holds the wake lock (core's backoff takes over). A waiter
/// that leaves the queue gives its locks back with wake_release (it holds no wake lock of a key
/// it waits for). taken_holding (:key :owner :take_wake): LeaseStatements::taken, and with the
/// row wake_hold's work (the wake lock taken unless :take_wake is 0): a row-lock holder's read of
/// the token it was given and its first step as holder in one round trip. wait_ahead (:wait_ms
/// :head), sent by the waiter at the head ahead of its take in one round trip (Waiters::ahead;
/// a lease's Session::run_behind, a row lock's in its holder session, HolderSession::send_behind):
/// while session :head (the one whose queue it is, the sender's own or its bookkeeping session)
/// holds the queue lock, the wake lock waited for and given back at once (the take behind it takes
/// it with the row); one row (got: 1 taken, 0 the bound came first, NULL not at the head).
struct WakeStatements {
  Statement wake_hold, wake_release, wake_wait, taken_holding, wait_ahead;
};

/// The server lock of the session strategies (session_locker.hpp), run in the holder session.
/// Parameters: :key, :kind (the strategy: the claims row's), :wait_ms (HolderSession::server_wait)
/// and the dialect's own (HolderSession::bind). A statement a dialect needs not stays empty.
struct LockStatements {
  /// advisory: `advisory_wait` takes the key's lock within :wait_ms: (1) taken, (0) not, (NULL)
  /// held by this session already; `advisory_try` without waiting (empty: `advisory_wait`).
  /// `advisory_holds`: (1) while this session holds it. `advisory_give_back`: lets it go, (1)
  /// when it was this session's. `advisory_numbered_*` (empty: none; `advisory_numbered_try`
  /// empty: `advisory_numbered_wait`): in the bookkeeping session
  /// itself, `advisory_try` / `advisory_wait` and then session_take (its parameters too) when
  /// taken, in one statement: one row of session_take's three columns (NULL: not numbered) and
  /// taken (1 or 0), or no row when not taken; one that fails with ErrorKind::wait_ended took no
  /// lock (after any other error it is given back). One that binds :record reads the failover
  /// gate itself when :fence is NULL and :wait_ms 0 (SessionLocker binds no fence only then):
  /// (NULL, NULL, NULL, 2) when it did not open, nothing taken.
  Statement advisory_try, advisory_wait, advisory_holds, advisory_give_back;
  Statement advisory_numbered_try, advisory_numbered_wait;
  /// Empty, or (where `advisory_numbered_*` are) in the bookkeeping session itself:
  /// LeaseStatements::release_recorded's work with `advisory_give_back`, in one statement: the
  /// row released, then the lock given back, then the history row, its outcome 'lost' unless the
  /// lock was this session's (in a block, Dialect::block: the lock given back after the commit
  /// of the row and its history, the key's wake name after it). Its parameters too. One row:
  /// (released 1 or 0, ours 1 or 0). A plain key's release is then one round trip.
  Statement advisory_released;
  /// Empty, or (in the bookkeeping session itself, where `advisory_released` is not)
  /// LeaseStatements::release, its parameters too, that then lets the lock go in the same
  /// statement, once it found the row the holder's: affected 1 when it released the row and the
  /// lock was this session's; 0 when it did not do both (it may have done either).
  Statement advisory_release_row;

  /// for-update, txn-insert: `begin` opens the transaction that holds the lock; `lock_wait` sets
  /// its lock wait to :wait_ms (or the dialect's form of it), for the transaction just begun or
  /// for the session (a session opens with none), as the holder session runs them
  /// (HolderSession::begin).
  /// for-update: `lock_claim` / `lock_claim_nowait` lock the key's claims row, affected 1 (0: no
  /// row, which `make_claim` inserts, committed; busy while another's insert is open).
  /// txn-insert: `insert_claim` inserts it uncommitted, affected 1 (waiting as the bound allows;
  /// a bound of 0 does not wait). `tag` / `untag` (empty: none): a name the holder keeps
  /// while it holds, so the server shows it: taken after txn-insert's insert (for-update's
  /// `lock_claim` takes it), given back after the transaction. The renewals' proof, (1) while
  /// held: `holds_claim` (txn-insert's own row), `alive` (for-update's transaction).
  /// `row_release_ended` (empty: none; used once the lock statement, or the `tag` after it,
  /// answered a non-NULL first column): LeaseStatements::release_recorded's work, with its
  /// parameters, in the holder's own transaction, whose end (HolderSession::run_and_commit,
  /// COMMIT) both keeps it and lets the lock go: the row's release and the lock's end are one,
  /// and the statement running in that transaction is the proof that the lock held to the end.
  /// txn-insert's own claims row goes in it, so the end keeps nothing of it; with a `tag`, it
  /// gives the tag back after the end. One row: (released 1 or 0, 1). A plain key's release is
  /// one round trip.
  std::string begin;
  Statement lock_wait;
  Statement lock_claim, lock_claim_nowait, make_claim, insert_claim, tag, untag, holds_claim, alive;
  Statement row_release_ended;
  /// Empty, or (for-update, txn-insert, where the server shows who holds a key's lock:
  /// Dialect::session_holds, and the upsert is core's ON CONFLICT form or the dialect runs a
  /// block, which runs its own session_take) LeaseStatements::session_take's work, its
  /// parameters too, on the bookkeeping session, numbering the row only while the server shows
  /// the holder session (:session_id) holding the key's row lock (where the session lock tells
  /// its holder and the holder keeps a tag, SessionLock::holder and tag: that tag, named :held,
  /// held by the holder session, :lock_session, its server id; both bound by the holder session
  /// in HolderSession::send_numbering): the statement proves the grant
  /// itself, so a dialect may send it ahead of the grant, behind a wait in the server
  /// (HolderSession::send_numbering). session_take's columns, or no row (not shown holding, or
  /// refused as session_take refuses, or its own failover gate not open where session_take
  /// reads it: the caller then numbers as before).
  Statement row_numbered;
  /// Empty, or (where `row_numbered` is, and the dialect's session lock waits and lets go) the
  /// gate that chains `row_numbered` to the grant it proves (HolderSession::send_numbering): a
  /// session lock on :gate, a lock of the holder session's own that no other session takes.
  /// `gate_take`: the holder takes it, waiting (within :wait_ms where the wait takes its bound as
  /// a parameter: no SessionLock::bound). `gate_give`: lets it go, (true) when it was this
  /// session's. `gate_wait` (:gate, and :lock_timeout or :wait_ms as the wait is bounded): the
  /// bookkeeping session waits for it within that bound (the dialect's lock-not-available error,
  /// or its answer 0, once over) and gives it back at once, so the statement sent after it runs
  /// only once the holder let it go.
  Statement gate_take, gate_wait, gate_give;
  /// Empty, or (where `row_numbered` is a block's and the key has a wake name) a wait for
  /// `row_numbered`'s proof, looked for within :poll_ms (ms), that a first attempt's numbering
  /// goes behind where no gate is taken first (HolderSession::send_numbering); given, core
  /// sends that numbering with a first attempt at a distance. It answers one row.
  Statement grant_wait;
};

}  // namespace dblock::sql

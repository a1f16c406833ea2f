#pragma once
// The rules every dialect once wrote in its own SQL, spelled once here and rendered through the
// few expressions a dialect really spells its own way (Dialect): the history of runs (insert,
// oldest, trim), --min-interval's due check, the numbering of fencing tokens and when a
// semaphore's header may be taken; and whole statements that are standard SQL but for a few
// expressions: ShedLock's (shedlock_statements.cpp), inspection's (inspect_statements.cpp),
// `dblock release`'s (release_statements.cpp) and the lease's (lease_statements.cpp). Each
// statement is still one round trip. A Dialect member returns SQL, never a yes or no: where a
// dialect has none of a thing (RETURNING, server sessions, a lease of its own clock) it returns
// "", and core writes nothing of it.

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/sql/identifiers.hpp"
#include "core/sql/lock_rows.hpp"
#include "core/sql/statements.hpp"
#include "core/sql/tables.hpp"

namespace dblock::sql {

/// (column, value) pairs, in order: an UPDATE's SET list, or an INSERT's columns and values.
using Assignments = std::vector<std::pair<std::string, std::string>>;

/// A conditional upsert (Dialect::upsert): inserts the row `values`, or, where `table` has a row
/// of the same name (byte for byte: a row that a collation finds for the name but that is spelled
/// otherwise is left alone), updates that row with `set` when `when` holds, else leaves it alone.
/// `set` and `when` are given how the statement names the existing row (`row`: "" or an alias and
/// its dot); a value "" in `set` is the inserted row's value of that column. `when` is of the row
/// as the statement found it, whatever the order of `set` (MySQL, which assigns one column after
/// another, each assignment seeing those before, tests it once, in the first: assign_each_if). A `set` of no
/// assignments leaves an existing row alone (`when` is not asked): an insert unless there is one,
/// met through `key`, or through any unique key where `key` is "".
struct Upsert {
  std::string table;  // quoted
  std::string alias;  // the existing row's name, where the dialect can give it one
  Assignments values;
  std::function<Assignments(std::string_view row)> set;
  std::function<std::string(std::string_view row)> when;
  std::string key = "name";  // the unique key's columns, where the dialect names the conflict
};

/// Dialect::upsert as INSERT ... ON CONFLICT (name) DO UPDATE SET ... WHERE (PostgreSQL, SQLite);
/// with `from` (a FROM and WHERE, PostgreSQL), the row's values are selected from it, and
/// nothing is written when it selects none.
std::string on_conflict_upsert(const Upsert& u);
std::string on_conflict_upsert(const Upsert& u, std::string_view from);

/// A take of :key's row (Dialect::take): the lease's (LeaseStatements::take has its contract) or
/// a session strategy's numbering under the server lock it holds (LeaseStatements::session_take),
/// as core spells it. Each says what it does in members, which a dialect's take renders: no
/// member says which take it is.
struct Take {
  /// The row's conditional upsert, its tokens above the failover fence `fence` (SQL: the bound
  /// :fence, a fence the statement reads itself, or "" where the dialect has none).
  std::function<Upsert(std::string_view fence)> upsert;
  /// The failover fence as the statement binds it (:fence), "" where the
  /// dialect has none: what `upsert` is given unless the take reads the fence itself.
  std::string fence;
  /// The taken row's columns (token, acquired_ms, expires_ms; NULL where one is not answered),
  /// for Dialect::returning. A take whose RETURNING answers a row it left alone too (MariaDB's)
  /// answers each NULL there.
  std::vector<std::string> returning;
  /// LeaseStatements::refusal's select list alone, over the row `row` ("" or an alias and its
  /// dot): for a take that says in the same statement why it took nothing, from the row of :key
  /// it did not take (MariaDB's RETURNING) or one it reads (PostgreSQL's, joined as `r`). Unset
  /// where the take says nothing of a row it left alone (session.take: the server lock keeps out
  /// every other holder of its kind, and core reads the row apart).
  std::function<std::string(std::string_view row)> refused;
  /// What the take does in the same statement once it took the row where `then_if` holds (SQL,
  /// "": always), as select-list items after the others, each NULL where it took none: the wake
  /// primitive's work (wake_statements: the key's wake name taken, its queue given back), where
  /// waiters hear a release by the session lock alone. Core's form (`standard`) leaves it to the
  /// read of `taken` that follows a take answering no rows (WakeStatements::taken_holding).
  std::vector<std::string> then;
  std::string then_if;
  /// Where the take numbers the row for a session lock (session.take): that the session is still
  /// the one the handshake gave (SQL over :started_id, which core binds NULL once it read the
  /// failover gate on it, and then it is not asked), for a take that reads the gate itself: the
  /// lock could not hold on another. "" for the lease's.
  std::string handshake;
  /// The take in core's form: the dialect's upsert (Dialect::upsert) of upsert(fence), then its
  /// RETURNING (Dialect::returning) of `returning`; the default Dialect::take.
  std::string standard;
  /// The table taken from, unquoted (Tables::unquoted), for a take that reads its catalog.
  std::string table_name;
};

/// A lease that a dialect keeps in a <prefix>locks row on a clock of its own, beside its
/// timestamp columns (SQLite: CLOCK_BOOTTIME in boot_*, which a wall-clock step cannot move). A
/// dialect without one leaves these as they are: "" and no assignments, and core then writes no
/// condition and no statement about it (ShedlockStatements::extend_own, InspectStatements::renew_own).
struct OwnLease {
  /// Over the row `row` ("" or an alias and its dot): 1 while the lease runs, 0 once it is over,
  /// NULL where it cannot be judged here (another boot, or none recorded).
  std::string (*live)(std::string_view row) = [](std::string_view) { return std::string(); };
  /// The assignments that start it for the token `token` (SQL), to end `ms` (SQL) from now.
  Assignments (*start)(std::string_view token, std::string_view ms) = [](std::string_view, std::string_view) {
    return Assignments();
  };
  /// The assignments that renew it to end `ms` (SQL) from now, for the row's token.
  Assignments (*renew)(std::string_view ms) = [](std::string_view) { return Assignments(); };
  /// The assignments that end it now, or `min_hold` (SQL, ms; "": none) after its start when later.
  Assignments (*end)(std::string_view min_hold) = [](std::string_view) { return Assignments(); };
};

/// A dialect's session lock (PostgreSQL's advisory locks, MySQL's named locks): a lock on a key
/// that a server session takes, keeps across its transactions and lets go, or loses when it
/// ends. Each member is an expression of a select list; core writes the statements around them
/// (lock_statements, queue_statements). A dialect without one leaves them unset: no statements.
struct SessionLock {
  /// The advisory strategy's lock of the key `name` (SQL: :key, or a row's name column), as the
  /// members below take it. Default: the key's hash (key_hash), which the holder session binds
  /// as :lock, as an integer (no row can name it: no advisory_release_row).
  std::string (*key)(const Tables& t, std::string_view name) = nullptr;
  /// Takes `key`: true when taken. Where `wait`, it waits within the bound that `bound` set, or
  /// within :wait_ms where the wait takes its bound itself (ErrorKind::wait_ended once over);
  /// else it answers false at once while another session holds it. One member for both, as
  /// transaction_lock: where the server's lock takes the wait as an argument, the take without
  /// waiting is the wait of 0, spelled once.
  std::string (*lock)(std::string_view key, bool wait) = nullptr;
  /// What bounds a lock wait of the rest of the transaction to :lock_timeout (a select-list
  /// item, run ahead of the wait: a row lock's too, LockStatements::lock_wait). "" where the wait
  /// takes its bound itself.
  std::string bound = {};
  /// Lets `key` go: true when this session held it.
  std::string (*unlock)(std::string_view key) = nullptr;
  /// Lets every lock of this session go, where the lock is re-entrant and counts its holds: a
  /// stacked second hold must not stay. "" where one unlock lets a key go.
  std::string unlock_all = {};
  /// 1 while this session holds `key`, else 0. Default: `holder` the session's own id
  /// (Dialect::session_id); without a `holder`, status's judgement (Dialect::session_holds) of
  /// :key's row as this session would record it (LockStatements::advisory_holds).
  std::string (*holds)(std::string_view key) = nullptr;
  /// The server's id (Dialect::session_id's) of the session that holds `key`, NULL when none
  /// does; nullptr where the server does not tell. Where it does, a take of a key the session
  /// holds already answers NULL (LockStatements::advisory_wait), and waiters hear a release by
  /// the lock alone (wake_statements).
  std::string (*holder)(std::string_view key) = nullptr;
  /// The lock a row lock's holder (for-update, txn-insert) keeps while it holds :key, named with
  /// :tag (its lock session's own), so the server shows who holds the key: taken with the row's
  /// lock (LockStatements::lock_claim, or the dialect's `tag` after txn-insert's insert) and given
  /// back after its transaction (`untag`). nullptr where the server shows no such holder.
  std::string (*tag)(const Tables& t) = nullptr;
  /// The lock `key` held to the end of the transaction that takes it (its commit or rollback
  /// gives it back, as the session's end does): true once taken. Where `wait`, it waits within
  /// the bound that `bound` set (none set: the server's own); else it answers false at once
  /// while another holds it. `key`: the lock's key as the dialect's lock takes it (SQL, one
  /// integer, or a list of integers where that tells the key's lock apart from the session
  /// lock's on the same hash). Core queues txn-insert's claim on it (LockStatements::insert_claim,
  /// on :hi and :lo, the halves of the key's hash that the holder session binds) and makes a
  /// schema's tables in turns on it (SchemaStatements::begin). nullptr where the dialect has
  /// none: a plain INSERT, and DDL that takes no turns.
  std::string (*transaction_lock)(std::string_view key, bool wait) = nullptr;
};

/// What a dialect spells its own way, for the rules of this file; each dialect gives one, in its
/// <name>_statements.cpp. A member with a default has core's form, standard SQL or what most
/// dialects share: a dialect sets only those it spells otherwise.
struct Dialect {
  /// The current time, as the timestamp columns store it.
  std::string now;
  /// The moment the expression is evaluated, as the timestamp columns store it, where `now` is
  /// the statement's or transaction's start: the time a lock the statement waited for was
  /// granted, and a row lock's release in the transaction its take opened
  /// (LockStatements::row_release_ended). "" where none (a lock that waits numbers no row in the
  /// same statement).
  std::string clock = {};
  /// 1970-01-01 00:00 UTC as the dialect's time, which epoch milliseconds count from. Default:
  /// SQL's TIMESTAMP WITH TIME ZONE literal.
  std::string epoch = "TIMESTAMP WITH TIME ZONE '1970-01-01 00:00:00+00'";
  /// The stored timestamp of `ms`, an integer SQL expression of epoch milliseconds. Default
  /// (nullptr): `ms` after the epoch, through plus_ms (time_of_ms_sql).
  std::string (*time_of_ms)(std::string_view ms) = nullptr;
  /// Whole milliseconds (an integer) from the last start of the row `row` ("" or an alias and its
  /// dot) to `now` (a time expression; SQLite judges on its own clock). Default (nullptr):
  /// ms_between the two, where the dialect gives it; else none: core compares the last start
  /// plus --min-interval with `now` (plus_ms), and the time left is the difference of their
  /// epoch_ms, exact where the column keeps whole milliseconds.
  std::string (*started_ms_ago)(std::string_view row, std::string_view now) = nullptr;
  /// 1 (true) while the lease of the row `row` ("" or an alias and its dot) runs at `now` (a time
  /// expression: `now`, or a statement's own time; SQLite judges on its own clock), else 0
  /// (false), never NULL. Default: its expires_at after `now` (IS TRUE: never NULL).
  std::string (*lease_live)(std::string_view row, std::string_view now) = [](std::string_view row, std::string_view at) {
    return "(" + std::string(row) + "expires_at > " + std::string(at) + ") IS TRUE";
  };

  /// Opens a write transaction, every one dblock runs (LeaseStatements::begin, ShedLock's, the
  /// session strategies' held transaction: LockStatements::begin), at the isolation level its
  /// statements are written for: each statement reads what committed before it (READ COMMITTED,
  /// or a lock on the whole database).
  std::string begin = "START TRANSACTION";
  /// Opens a transaction whose commit need not wait for the disk (LeaseStatements::begin_release:
  /// only the acquisition must survive a crash). Default: `begin`, then, where the dialect gives
  /// unsynced_commit, a SELECT of it; else every commit waits.
  std::string begin_unsynced = {};
  /// ShedLock's now, as its JDBC provider's server-time statements write it: UTC wall time, as
  /// ShedLock's TIMESTAMP columns hold it (shedlock.hpp). Default: `now`.
  std::string utc_now = now;
  /// The timestamp `expr` as integer epoch milliseconds; NULL stays NULL. Default (nullptr):
  /// ms_between the epoch and `expr`, in parentheses (epoch_ms_sql).
  std::string (*epoch_ms)(std::string_view expr) = nullptr;
  /// Whole milliseconds (an integer, rounded down; NULL where either is NULL) from the timestamp
  /// `from` to the timestamp `to`, an operand of a comparison or of + and -, where the dialect
  /// counts them itself: its times are finer than the millisecond (MySQL's microseconds), so the
  /// difference of two epoch_ms could be one off. nullptr where not.
  std::string (*ms_between)(std::string_view from, std::string_view to) = nullptr;
  /// The timestamp `ms` (integer SQL, milliseconds) after the timestamp `time`.
  std::string (*plus_ms)(std::string_view time, std::string_view ms) = nullptr;
  /// The texts of the JSON array that the parameter `param` holds, as a subquery for IN.
  /// Default: SQL's JSON_TABLE (SQL:2016; MySQL 8, MariaDB 10.6), each text as a name of 255.
  std::string (*json_texts)(std::string_view param) = [](std::string_view param) {
    return "(SELECT k FROM JSON_TABLE(" + std::string(param) + ", '$[*]' COLUMNS(k VARCHAR(255) PATH '$')) AS j)";
  };
  /// " RETURNING " and `columns`, or "" where an INSERT or UPDATE returns no rows: core then
  /// reads them in a statement of its own (ShedlockStatements::numbered, InspectStatements::renewed).
  std::string (*returning)(std::string_view columns) = [](std::string_view columns) {
    return " RETURNING " + std::string(columns);
  };
  /// The conditional upsert (Upsert), without RETURNING. Default: ON CONFLICT (on_conflict_upsert).
  std::string (*upsert)(const Upsert& u) = &on_conflict_upsert;
  /// 1 when the server shows the session recorded in the row `row` ("" or an alias and its dot)
  /// of `t.locks` holding that row's key's lock (a crashed session holder then shows free), else
  /// 0; never NULL. Default "0": no server sessions.
  std::string (*session_holds)(std::string_view row, const Tables& t) = [](std::string_view, const Tables&) {
    return std::string("0");
  };
  /// What `dblock release` of the rows `rows` of `t.locks` answers (ReleaseStatements::release):
  /// a SELECT over `rows` (a FROM item that names them l: the table and its WHERE, or the
  /// release's RETURNING), each row's (session, lock): the server session that holds the row's
  /// key's lock, as status judges it (session_holds; NULL: none), and the dialect's name of that
  /// lock, each judged once; columns after those may do more in the same statement (PostgreSQL
  /// tells the key's waiters and ends that session there). "" where there are no server
  /// sessions (the default): the release answers nothing.
  std::string (*ended_session)(std::string_view rows, const Tables& t) = [](std::string_view, const Tables&) {
    return std::string();
  };
  /// A lease of the dialect's own clock, where it keeps one (OwnLease).
  OwnLease own_lease = {};
  /// Its session lock, where it has one (SessionLock).
  SessionLock session_lock = {};
  /// LeaseStatements::take and session_take from `k`: the dialect's conditional upsert, its
  /// RETURNING or none, and what it can read in the same statement: the failover gate (a take
  /// that binds :record reads it) and the refusal (`k.refused`, after the taken row's columns).
  /// Default: core's form, `k.standard`.
  std::string (*take)(const Take& k) = [](const Take& k) { return k.standard; };
  /// What a lease's release returns of the row it released (a select list; "" for nothing):
  /// where a dialect tells the key's waiters in the release. unsynced_commit follows it there
  /// (the release alone holds nothing a crash must keep).
  std::string release_returns = {};
  /// A select-list item that lets the commit of the statement selecting it skip the disk wait
  /// (only the acquisition must survive a crash), given where each part of one statement may
  /// write (a data-modifying WITH): core then writes a release with its run's history row, and
  /// a history row with its trim, as one statement each (release_recorded, history_record).
  /// "" where not.
  std::string unsynced_commit = {};
  /// A block of statements sent as one (SQL/PSM's BEGIN ... END, with its local variables, IF,
  /// SET and GET DIAGNOSTICS), where the dialect runs one and gives no unsynced_commit: the
  /// block that declares `variables` (each DECLARE ended by ";", or "") and runs `body` (each
  /// statement ended by ";"), any error rolling its transaction back and raised as it came. Core
  /// then writes a release with its run's history row, and a history row with its trim, as one
  /// block each (release_recorded, history_record). nullptr where not.
  std::string (*block)(std::string_view variables, std::string_view body) = nullptr;
  /// The server's incarnation (failover.hpp) as SQL: a text that a promotion or a restore into
  /// another cluster changes. "" where the dialect has none: no failover statements, no fence.
  std::string incarnation = {};
  /// The server's id of the session that runs the statement, as Session::started_id gives it
  /// (DoctorStatements::session_id, and the failover record's read); "" where there are no
  /// server sessions.
  std::string session_id = {};
  /// What the failover record's read answers after the session's id, over dblock's tables `t`
  /// (FailoverStatements::read, after failover::session_column): 1 on a Galera node, else 0,
  /// then any column that fails the read where the tables cannot keep the dialect's statements
  /// safe. "" or none: 0, no cluster of that kind.
  std::string (*serving)(const Tables& t) = nullptr;
};

/// The stored timestamp of `ms` (integer SQL, epoch milliseconds): Dialect::time_of_ms, or `ms`
/// after Dialect::epoch (Dialect::plus_ms).
std::string time_of_ms_sql(const Dialect& d, std::string_view ms);

/// The timestamp `expr` as integer epoch milliseconds: Dialect::epoch_ms, or Dialect::ms_between
/// Dialect::epoch and `expr`; epoch_ms_of as a function, for the row layer (lock_rows.hpp).
std::string epoch_ms_sql(const Dialect& d, std::string_view expr);
rows::EpochMs epoch_ms_of(const Dialect& d);

/// A take of :key's row of <prefix>locks, with the holder's columns (tables.hpp, Column::holder)
/// each from the bound parameter of its name (an integer's through Dialect::integer), so a new
/// one needs no statement edited: taken_row, the inserted row's values (name, the holder's
/// columns, then `rest`); taken_set, the SET items (Upsert::set) that give the existing row the
/// holder's columns as inserted, then `rest`.
Assignments taken_row(const Dialect& d, Assignments rest);
Assignments taken_set(Assignments rest);

/// The SET items of `set`, each led by ", " ("" for none).
std::string more_assignments(const Assignments& set);

/// --table-format shedlock's statements (ShedlockStatements), over dblock's tables `t` and
/// ShedLock's table `shedlock` (quoted).
ShedlockStatements shedlock_statements(const Dialect& d, const Tables& t, const std::string& shedlock);

/// ShedlockStatements::holder's columns, as a SELECT over ShedLock's table `s` and dblock's row
/// `l` of the same name, which a WHERE or ORDER BY on s.name may follow.
std::string shedlock_holder_sql(const Dialect& d, const Tables& t, const std::string& shedlock);

/// What status, history and `dblock renew` read (InspectStatements), over the tables of
/// `options` (ShedLock's with --table-format shedlock) quoted as `sd` quotes them, with the
/// reads of each older shape of dblock's tables (InspectStatements::older, tables.hpp).
InspectStatements inspect_statements(const Dialect& d, const tables::SchemaDialect& sd, const BackendOptions& options);

/// The lease's statements (LeaseStatements) over dblock's tables `t`, in the dialect's
/// expressions, its failover statements (failover_statements) included, lock_row with FOR
/// UPDATE (a dialect without it replaces it), session_take where it has server sessions
/// (Dialect::session_id; a dialect may replace it); release_recorded and history.record where it
/// gives Dialect::unsynced_commit.
LeaseStatements lease_statements(const Dialect& d, const Tables& t);
/// LeaseStatements::taken's text, `more` (", column ...") after its three columns: a dialect's
/// own work in the same round trip (MySQL's wake.taken_holding).
std::string taken_sql(const Dialect& d, const Tables& t, std::string_view more = {});

/// HistoryStatements::record over `t.runs`: the row, and its trim as record_run decides it, in
/// one statement that commits without the disk wait (Dialect::unsynced_commit, where given), or
/// in a block (Dialect::block) that commits.
Statement history_record(const Dialect& d, const Tables& t);

/// The trim of :name's history rows as record_run decides it (HistoryStatements::record), as a
/// statement of a block (Dialect::block) after the run's row: IF the oldest row's token is more
/// than :keep + :slack below :token THEN history.trim. PostgreSQL's WITH part asks the same.
std::string history_trim_block_sql(const Dialect& d, const Tables& t);

/// The run's history row of a release (release_recorded's: :name :token :run_owner :run_host
/// :run_pid :strategy :started_ms :outcome :run_exit_code), its outcome 'lost' unless `ours` (SQL),
/// as an INSERT ... SELECT: a part of a statement, or a statement of a block.
std::string run_row_sql(const Dialect& d, const Tables& t, std::string_view ours);

/// LeaseStatements::release_recorded's form, as `id`: `release` (a lease's, whose answer says
/// whether the row was still the holder's), then `between` ("" for none: a part named `g`
/// whose column `ours` says whether the lock was still the holder's, reading the release's
/// part `u` so that it runs after it), then the run's history row, its outcome 'lost' unless
/// ours, and its trim as history_record's. One row: (released, ours). Where the dialect gives
/// Dialect::unsynced_commit; the session strategies' releases (LockStatements) pass the
/// dialect's own `between`. Else, without `between`, in a block (Dialect::block) that commits
/// and then gives back the key's wake name (:wake_given_back) and queue, where waiters hear a
/// release by the session lock alone (wake_statements): (released, ours, those two answers).
Statement release_recorded(const Dialect& d, const Tables& t, const Statement& release, std::string id,
                           const std::string& between = "");

/// DoctorStatements::session_id: (the server's id of the session), Dialect::session_id; empty
/// where there is none.
Statement session_id_statement(const Dialect& d);

/// doctor's statements (DoctorStatements) that are standard SQL: the server's version(), the
/// privilege probes of the tables of `options`, quoted as `sd` quotes them, can_create and
/// session_id; the dialect adds its checks.
DoctorStatements doctor_statements(const Dialect& d, const tables::SchemaDialect& sd, const BackendOptions& options);

/// The session strategies' server-lock statements (LockStatements): the dialect's own `s` (its
/// claims' lock and insert, and any statement it writes its own way), completed with what is
/// standard SQL: `begin` (Dialect::begin), lock_claim (SELECT ... FOR UPDATE) and insert_claim
/// (a plain INSERT, or one queued on the key's SessionLock::transaction_lock where the dialect
/// has one), each unless the dialect wrote its own, lock_claim_nowait (lock_claim with
/// NOWAIT, unless the dialect wrote its own: MariaDB's NOWAIT also refuses to wait for a
/// table's metadata lock), make_claim (the dialect's upsert that leaves a row alone),
/// holds_claim and alive; row_release_ended (release_recorded at the dialect's clock, txn-insert's
/// own claims row deleted between), where the dialect gives both and `s` has none, or the same
/// work in its block (Dialect::block) with the holder tag and the wake name given back after the
/// commit, and advisory_released likewise in a block, over SessionLock::key;
/// and, each where the dialect's session lock (Dialect::session_lock) has what it needs and `s`
/// has none, the advisory strategy's statements over it and lock_wait (SessionLock::bound).
/// row_numbered where the server shows a session's holding (Dialect::session_holds): core's ON
/// CONFLICT form, or, in a dialect that runs a block (Dialect::block), `session_take` (the
/// dialect's own LeaseStatements::session_take, which answers its row) behind the same proof.
LockStatements lock_statements(const Dialect& d, const Tables& t, LockStatements s, const Statement& session_take = {});

/// session.take's upsert (session_upsert, at `at`), its rows selected `from` what decides whether
/// it is taken ("": it is), and RETURNING session_take's three columns: where the dialect's upsert
/// is ON CONFLICT's and returns rows. The advisory strategy's numbering in the lock's own
/// statement (LockStatements::advisory_numbered_*) reads the lock's answer so.
/// `fence_sql`: the fence a new token must exceed ("": :fence).
std::string numbered_upsert_sql(const Dialect& d, const Tables& t, std::string_view from, std::string_view at,
                               std::string_view fence_sql = {});

/// 1 while this session holds the session lock `key` (SessionLock::holds, or its holder the
/// session), "" where the dialect has none.
std::string holds_sql(const Dialect& d, std::string_view key);

/// How waiters hear a release through the dialect's session lock alone (WakeStatements), where
/// it tells a lock's holder (SessionLock::holder); empty elsewhere.
WakeStatements wake_statements(const Dialect& d, const Tables& t);
/// Whether wake_statements has them: the session lock takes, waits, gives back and tells who
/// holds it (asked where a statement adds the wake's part, without making them all).
bool wakes_by_session_lock(const SessionLock& l);

/// A lease waiter's queue on the session lock `key` (SQL; SessionLock): `wait` takes it within
/// :lock_timeout (SessionLock::lock, waiting), `leave` gives it back. Empty where the dialect has no
/// session lock that waits.
QueueStatements queue_statements(const Dialect& d, std::string_view key);

/// The failover lock-delay's statements (FailoverStatements) over dblock's tables `t`, standard
/// SQL but for the dialect's incarnation, times and serving columns; all empty where the
/// dialect has no incarnation (Dialect::incarnation).
FailoverStatements failover_statements(const Dialect& d, const Tables& t);

/// SchemaStatements::failover_record over dblock's tables `t`: the record as failover.create
/// makes it, for the server the script runs on, its name spelled in SQL (CHR, which PostgreSQL
/// and MariaDB have) and met through any unique key (a table without its key on name is the
/// shape check's to name, not the script's); "" where the dialect has no incarnation.
std::string failover_record_sql(const Dialect& d, const Tables& t);

/// tables::schema_statements of `sd`, with the failover record in the dialect `d`
/// (failover_record_sql) and, where its session lock has a transaction_lock, `begin`: the
/// dialect's, then that lock on a key of the schema's own; the dialect adds the rest of
/// SchemaStatements.
SchemaStatements schema_statements(const Dialect& d, const tables::SchemaDialect& sd, const BackendOptions& options,
                                   std::string_view dialect_name, std::span<const Strategy> strategies);

/// The session strategies' numbering of the row of :key (LeaseStatements::session_take) as an
/// upsert, its tokens above `fence` (SQL; "" where there is none), its times `at` (SQL: now, or
/// when a lock the statement waited for was granted), which its condition reads as `taken_at`
/// (SQL: the same time, as the conflict's condition can name it).
Upsert session_upsert(const Dialect& d, const Tables& t, std::string_view fence, std::string_view at,
                      std::string_view taken_at);

/// LeaseStatements::history over <prefix>runs, quoted as `runs`.
HistoryStatements history_statements(const Dialect& d, const std::string& runs);

/// `dblock release` of another process's holder (ReleaseStatements): `holder`, where the dialect
/// answers a release in a read of its own (Dialect::returning), and `release`; where there are
/// server sessions (Dialect::ended_session), session_gone over SessionLock::holder where the
/// server tells a lock's holder, else over Dialect::session_holds. The
/// dialect adds how a session is ended where the release does not end it (end_session; a session
/// that ended by itself is ErrorKind::no_session), and may write its own session_gone.
ReleaseStatements release_statements(const Dialect& d, const Tables& t);

/// `dblock renew` / `release` of another process's holder (dblock(1)): whether the row `row` ("" or
/// an alias and its dot) is the holder named by :owner and :token (either may be NULL; both
/// must match when given).
std::string named_holder_sql(std::string_view row);

/// --min-interval (dblock(1)), over :min_interval_ms: whether the row `row` may start at `now`
/// (none asked, never started, or its last start at least that long before `now`).
std::string due_sql(const Dialect& d, std::string_view row, std::string_view now);

/// The milliseconds until the row `row` may start (LeaseStatements::refusal's due_in_ms), read
/// only when --min-interval is asked: NULL when it never started, <= 0 when it may now.
std::string due_in_ms_sql(const Dialect& d, std::string_view row);

/// Fencing tokens (dblock(1), FENCING TOKENS): the token of a row taken. `given`: the :token
/// parameter, when not NULL, is the token (a semaphore slot's, from its header); else one above
/// the row's last token and above `fence`, the failover fence as a SQL expression ("" where
/// there is none). first_token_sql: a new row's; next_token_sql: the row `row`'s ("" or an alias
/// and its dot).
std::string first_token_sql(bool given, std::string_view fence);
std::string next_token_sql(std::string_view row, bool given, std::string_view fence);

/// Semaphores (docs/backend-contract.md, "Semaphores"; LeaseStatements::header_take): whether
/// the row `row` ("" or an alias and its dot) of `locks` may become :key's header, over :slots
/// :recount :first :past. A header (strategy 'semaphore') when it records :slots or, with
/// :recount = 1, no slot row between :first and :past is held; any other row when nobody holds
/// it: never taken, or released or a lease, and no lease of it running (a --min-hold too). The
/// slot rows are read through a derived table, which lets MySQL read the table it writes.
std::string header_free_sql(const Dialect& d, std::string_view row, const std::string& locks);

/// The failover lock-delay's gate (failover.hpp), judged on the record `r` ("" or an alias and
/// its dot), a row of <prefix>locks: owner the incarnation recorded, token the fence, expires_at
/// the end of the lock-delay, pid the longest TTL in ms. failover_delayed_sql: a lock-delay is
/// in force (never NULL); failover_covers_sql: :ttl_ms is within the longest TTL;
/// failover_open_sql: a grant may go on with nothing written, `here` (SQL: the record names
/// the server's incarnation) and neither of the others in the way. FailoverStatements::read
/// answers each, so failover.cpp judges nothing itself; a take that reads the gate itself
/// (LeaseStatements::take, Dialect::take) asks failover_open_sql.
std::string failover_delayed_sql(const Dialect& d, std::string_view r);
std::string failover_covers_sql(std::string_view r);
std::string failover_open_sql(const Dialect& d, std::string_view r, std::string_view here);
/// failover_open_sql's conditions without its parentheses, to be ANDed with others. With no
/// `here` (""), either is the others alone, for a take that reads `here` apart.
std::string failover_open_conditions(const Dialect& d, std::string_view r, std::string_view here);

}  // namespace dblock::sql

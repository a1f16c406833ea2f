// The lease's statements (statements.hpp, LeaseStatements), written once and rendered through
// the dialect's expressions (rules.hpp, Dialect): the take and why it refused, the renewal, the
// release, a semaphore's header, the history and the failover statements. The dialect adds the
// form of its take (Dialect::take) and how a release tells the waiters. Also the standard parts
// of the session strategies' lock statements and of doctor's.

#include "core/sql/lock_rows.hpp"
#include "core/sql/rules.hpp"

namespace dblock::sql {
namespace {

// Whether the dialect's upsert is core's ON CONFLICT form (on_conflict_upsert), whose condition
// may name the inserted row (EXCLUDED) and whose row may be selected FROM another part.
bool upserts_on_conflict(const Dialect& d) {
  return d.upsert == static_cast<std::string (*)(const Upsert&)>(&on_conflict_upsert);
}

// A refused take reads of the row `row` what it says of the holder (refused(), take_header):
// not the last run's outcome (rows::refusal_select_list); then whether its lease runs.
std::string refusal_columns(const Dialect& d, std::string_view row) {
  return rows::refusal_select_list(epoch_ms_of(d), d.now, row) + ", CASE WHEN " + d.lease_live(row, d.now) +
         " THEN 1 ELSE 0 END, ";
}

// LeaseStatements::refusal's select list over `row`: refusal_columns and when the key may start.
std::string refused_sql(const Dialect& d, std::string_view row) { return refusal_columns(d, row) + due_in_ms_sql(d, row); }

// `columns`, comma-separated.
std::string joined(const std::vector<std::string>& columns) {
  std::string out;
  for (const auto& c : columns) out += (out.empty() ? "" : ", ") + c;
  return out;
}

// A session strategy's numbering answers (token, acquired_ms, NULL): session_take's columns.
std::vector<std::string> numbered_columns(const Dialect& d) {
  return {"token", epoch_ms_sql(d, "acquired_at"), "NULL"};
}

}  // namespace

// Its upsert meets the name's row through any unique key: a second row of the name (a table
// whose key is not the name alone) fails the subquery, which sends the run to the schema check
// (exit 78).
std::string taken_sql(const Dialect& d, const Tables& t, std::string_view more) {
  return "SELECT token, " + epoch_ms_sql(d, "acquired_at") + ", " + epoch_ms_sql(d, "expires_at") + std::string(more) + " FROM " +
         t.locks + " WHERE name = :key AND owner = :owner AND name = (SELECT name FROM " + t.locks + " WHERE name = :key)";
}

LeaseStatements lease_statements(const Dialect& d, const Tables& t) {
  const std::string& incarnation = d.incarnation;
  const std::string ttl = ":ttl_ms", token = ":token";
  const std::string fence = incarnation.empty() ? std::string() : std::string(":fence");
  const std::vector<std::string> taken_columns{"token", epoch_ms_sql(d, "acquired_at"), epoch_ms_sql(d, "expires_at")};
  const std::string taken = joined(taken_columns);
  const std::string status = refusal_columns(d, "");
  const std::string holder = " WHERE name = :key AND owner = :owner AND token = " + token + " AND released_at IS NULL";
  LeaseStatements s;
  s.begin = d.begin;
  s.begin_release = !d.begin_unsynced.empty() ? d.begin_unsynced
                    : d.unsynced_commit.empty() ? d.begin
                                                : d.begin + "; SELECT " + d.unsynced_commit;
  s.history = history_statements(d, t.runs);
  s.refusal = {"lease.refusal", "SELECT " + refused_sql(d, "") + " FROM " + t.locks + " WHERE name = :key"};

  // The row is free when its lease is over (released, expired, or a session strategy's, which
  // has none), no other strategy's holder may still hold it, and --min-interval has passed.
  auto take = [&](std::string_view f) {
    const std::string first = first_token_sql(true, f), at_fence(f);
    Assignments values = taken_row(d, {{"token", first},         {"strategy", "'lease'"},
                                        {"session_id", "NULL"},    {"acquired_at", d.now},
                                        {"renewed_at", d.now},     {"expires_at", d.plus_ms(d.now, ttl)},
                                        {"released_at", "NULL"},   {"last_started_at", d.now}});
    for (auto& own : d.own_lease.start(first, ttl)) values.push_back(std::move(own));
    return Upsert{t.locks, "l", std::move(values),
                  [&d, ttl, at_fence](std::string_view row) {
                    const std::string next = next_token_sql(row, true, at_fence);
                    Assignments set = taken_set({{"session_id", "NULL"},    {"renewed_at", ""},
                                                 {"token", next},           {"strategy", "'lease'"},
                                                 {"released_at", "NULL"},   {"acquired_at", ""},
                                                 {"expires_at", ""},        {"last_started_at", ""}});
                    for (auto& own : d.own_lease.start(next, ttl)) set.push_back(std::move(own));
                    return set;
                  },
                  [&d](std::string_view row) {
                    const std::string over = "NOT " + d.lease_live(row, d.now);
                    return over + " AND " + rows::strategy_allows_sql(row, "'lease'", over) + " AND " +
                           due_sql(d, row, d.now);
                  }};
  };
  Take lease;
  lease.upsert = take;
  lease.fence = fence;
  lease.returning = taken_columns;
  lease.refused = [&d](std::string_view row) { return refused_sql(d, row); };
  // Where waiters hear a release by the session lock alone (wake_statements), a plain key's
  // holder takes the key's wake name with the row and gives its queue back (wake.hold's work).
  const SessionLock& l = d.session_lock;
  const bool wakes = wakes_by_session_lock(l);
  if (wakes) lease.then = {l.lock(":wake", false), l.unlock(":queue")};
  lease.then_if = token + " IS NULL";
  lease.standard = d.upsert(take(fence)) + d.returning(taken);
  lease.table_name = t.unquoted("locks");
  s.take = {"lease.take", d.take(lease)};
  // Where the take returns no rows.
  if (d.returning(taken).empty()) s.taken = {"lease.taken", taken_sql(d, t)};

  // Renewed, it says where it can whether the failover record names another server (a failover
  // the grant survived): the holder then starts the lock-delay (failover::notice).
  s.renew = {"lease.renew", "UPDATE " + t.locks + " SET renewed_at = " + d.now + ", expires_at = " +
                                d.plus_ms(d.now, ttl) + more_assignments(d.own_lease.renew(ttl)) + holder +
                                (incarnation.empty() ? std::string()
                                                     : d.returning("(SELECT count(*) FROM " + t.locks +
                                                                   " WHERE name = :record AND owner <> " +
                                                                   incarnation + ")"))};

  // The lease ends now, or at the end of its --min-hold when later; now truncated to the
  // millisecond, never rounded up into the column's precision (a status read right after the
  // release must find the key free), and acquired_at, which may have been, read only with
  // --min-hold.
  const std::string min_hold = ":min_hold_ms", held_until = d.plus_ms("acquired_at", min_hold);
  const std::string now_ms = time_of_ms_sql(d, epoch_ms_sql(d, d.now)), finished = ":finished = 1";
  const std::string release_returns =
      d.release_returns + (d.unsynced_commit.empty() ? std::string() : ", " + d.unsynced_commit);
  s.release = {"lease.release",
               "UPDATE " + t.locks + " SET released_at = " + d.now + ", expires_at = CASE WHEN " + min_hold + " > 0 AND " +
                   held_until + " > " + now_ms + " THEN " + held_until + " ELSE " + now_ms +
                   " END, last_finished_at = CASE WHEN " + finished + " THEN " + d.now +
                   " ELSE last_finished_at END, last_exit_code = CASE WHEN " + finished +
                   " THEN :exit_code ELSE last_exit_code END" + more_assignments(d.own_lease.end(min_hold)) +
                   holder + (d.release_returns.empty() ? std::string() : d.returning(release_returns))};
  // With its run's history row, in one statement, where the dialect's statements can.
  s.history.record = history_record(d, t);
  s.release_recorded = release_recorded(d, t, s.release, "lease.release_recorded");

  // Far in the future, not an infinity: a plain lease finds the header held, and its time
  // still converts to epoch milliseconds (9999-12-31 UTC).
  const std::string never = time_of_ms_sql(d, "253402214400000");
  const std::string first = first_token_sql(false, fence);
  Assignments header = taken_row(d, {{"token", first},         {"strategy", "'semaphore'"},
                                      {"session_id", "NULL"},    {"acquired_at", d.now},
                                      {"renewed_at", d.now},     {"expires_at", never},
                                      {"released_at", "NULL"},   {"last_started_at", d.now},
                                      {"slots", ":slots"}});
  s.header_take = {"semaphore.header_take",
                   d.upsert({t.locks, "l", std::move(header),
                             [&](std::string_view row) {
                               return taken_set({{"session_id", "NULL"},
                                                 {"renewed_at", ""},
                                                 {"last_started_at", ""},
                                                 {"token", next_token_sql(row, false, fence)},
                                                 {"slots", ""},
                                                 {"strategy", "'semaphore'"},
                                                 {"acquired_at", ""},
                                                 {"released_at", "NULL"},
                                                 {"expires_at", ""}});
                             },
                             [&](std::string_view row) { return header_free_sql(d, row, t.locks); }}) +
                       d.returning("token, NULL, NULL")};  // only its token is read (take_header)
  s.header_refusal = {"semaphore.header_refusal", "SELECT " + status + "slots FROM " + t.locks + " WHERE name = :key"};
  // A dialect whose `begin` locks the whole database (SQLite) writes its own, without FOR UPDATE.
  s.lock_row = {"lock_row", "SELECT 1 FROM " + t.locks + " WHERE name = :key FOR UPDATE"};
  s.failover = failover_statements(d, t);
  // A server's (one with sessions: Dialect::session_id) session strategies number the row
  // through the dialect's take: core's form is its upsert and its RETURNING, the token read back
  // by `taken` where it returns none (ON CONFLICT's condition reads the inserted row's time).
  // Nothing said of a row left alone (no `refused`); the queue given back once taken, a
  // semaphore slot's too; the gate, where the take reads it, asks the handshake's session.
  if (!d.session_id.empty()) {
    const std::string taken_at = upserts_on_conflict(d) ? "EXCLUDED.acquired_at" : d.now;
    auto numbering = [&d, &t, taken_at](std::string_view f) { return session_upsert(d, t, f, d.now, taken_at); };
    Take session;
    session.upsert = numbering;
    session.fence = fence;
    session.returning = numbered_columns(d);
    if (wakes) session.then = {l.unlock(":queue")};
    session.handshake = d.session_id + " = :started_id";
    session.standard = d.upsert(numbering(fence)) + d.returning(joined(session.returning));
    session.table_name = t.unquoted("locks");
    s.session_take = {"session.take", d.take(session)};
  }
  return s;
}

Upsert session_upsert(const Dialect& d, const Tables& t, std::string_view fence, std::string_view at,
                      std::string_view taken_at) {
  const std::string now(at), when_at(taken_at), above(fence), first = first_token_sql(true, fence);
  Assignments values = taken_row(d, {{"token", first},             {"strategy", ":strategy"},
                                      {"session_id", ":session_id"}, {"acquired_at", now},
                                      {"renewed_at", now},           {"expires_at", "NULL"},
                                      {"released_at", "NULL"},       {"last_started_at", now}});
  // The server lock on :key is ours, so the row is taken whoever of this strategy it names;
  // never a semaphore's header, nor a row another strategy's holder may still hold (the server
  // lock excludes only holders of its own kind), nor while a --min-hold of its last holder runs
  // (a released row's expires_at ahead) or --min-interval has not passed. The columns in the
  // order that gives the fewest lines in every dialect's listing (dblock schema --statements):
  // the holder, its times, the token, then the renewal's, the lease's and the run's times.
  return Upsert{t.locks, "l", std::move(values),
                [&d, above](std::string_view row) {
                  return taken_set({{"strategy", ""},      {"session_id", ""},
                                    {"acquired_at", ""},   {"released_at", "NULL"},
                                    {"token", next_token_sql(row, true, above)},
                                    {"renewed_at", ""},    {"expires_at", "NULL"},
                                    {"last_started_at", ""}});
                },
                [&d, when_at](std::string_view row) {
                  const std::string r(row), over = r + "expires_at <= " + when_at;
                  return "(" + r + "strategy IS NULL OR " + r + "strategy <> 'semaphore') AND " +
                         rows::strategy_allows_sql(row, ":strategy", over) + " AND (" + r + "expires_at IS NULL OR " +
                         over + ") AND " + due_sql(d, row, when_at);
                }};
}

}  // namespace dblock::sql

namespace dblock::sql {

Statement session_id_statement(const Dialect& d) {
  if (d.session_id.empty()) return {};
  return {"doctor.session_id", "SELECT " + d.session_id};
}

DoctorStatements doctor_statements(const Dialect& d, const tables::SchemaDialect& sd, const BackendOptions& options) {
  DoctorStatements s;
  s.server = {"doctor.server", "SELECT version()"};
  s.probe = privilege_probes(options, sd.quote);
  // May the account create tables: asked of the server, as the probes ask, not read in its
  // catalog (MariaDB's information_schema shows no CREATE granted through a role). A CREATE
  // TABLE that no server makes, since SQL wants a table's column names distinct, and that
  // PostgreSQL and MariaDB refuse for that only after they checked the privilege and the schema
  // to create in: nothing is made, nor rolled back, where DDL commits on its own (MySQL); the
  // refusal is in a server log that logs failed statements (PostgreSQL's default). A table of
  // its own name: a CREATE TABLE of one in use would wait for its metadata lock.
  s.can_create = {"doctor.can_create", "CREATE TABLE " + quote_identifier(options.table_prefix + "doctor_probe", sd.quote) +
                                           " (probe INTEGER, probe INTEGER)"};
  s.session_id = session_id_statement(d);
  return s;
}

namespace {

// Where the server tells a lock's holder (SessionLock::holder): `key`'s holder is the session
// `id` (SQL, never NULL), a condition that is not true where none holds it.
std::string held_by(const SessionLock& l, std::string_view key, const std::string& id) {
  return l.holder(key) + " = " + id;
}

}  // namespace

std::string holds_sql(const Dialect& d, std::string_view key) {
  const SessionLock& l = d.session_lock;
  if (l.holds) return l.holds(key);
  return l.holder ? "CASE WHEN " + held_by(l, key, d.session_id) + " THEN 1 ELSE 0 END" : std::string();
}

std::string numbered_upsert_sql(const Dialect& d, const Tables& t, std::string_view from, std::string_view at,
                               std::string_view fence_sql) {
  const std::string fence = d.incarnation.empty() ? std::string() : fence_sql.empty() ? std::string(":fence") : std::string(fence_sql);
  return on_conflict_upsert(session_upsert(d, t, fence, at, "EXCLUDED.acquired_at"), from) +
         d.returning(joined(numbered_columns(d)));
}

namespace {

// The lock's statement: one row of (got, at), at the moment the lock was answered (Dialect::clock),
// so that a row numbered after a wait has the time of the grant, not of the statement's start.
// A wait's bound (SessionLock::bound) is set in its FROM, which is evaluated first. `at`: with
// the moment, where a row may be numbered with it.
std::string lock_sql(const Dialect& d, const std::string& got, bool waits, bool at = true) {
  const SessionLock& l = d.session_lock;
  return "SELECT " + got + " AS got" + (d.clock.empty() || !at ? "" : ", " + d.clock + " AS at") +
         (waits && !l.bound.empty() ? " FROM (SELECT " + l.bound + ") c" : "");
}

// A take's answer (SessionLock::lock, waiting or not): where the server tells the lock's holder,
// NULL when this session holds it already (a second hold of a re-entrant lock would need a
// second give-back).
std::string got(const Dialect& d, const std::string& key, bool wait) {
  const SessionLock& l = d.session_lock;
  if (!l.holder) return l.lock(key, wait);
  return "CASE WHEN " + held_by(l, key, d.session_id) + " THEN NULL ELSE " + l.lock(key, wait) + " END";
}

// The give-back: whether the key's lock was this session's, then (SessionLock::unlock_all) every
// lock of the session, so a stacked second hold never stays; the subquery is kept apart (OFFSET
// 0) so it is evaluated before the outer row, which names it `alias`. `after` (" FROM ...", or
// ""): what it runs after.
std::string give_back_sql(const SessionLock& l, const std::string& key, const std::string& after, std::string_view alias) {
  const std::string ours = "SELECT " + l.unlock(key) + " AS ours" + after;
  return l.unlock_all.empty() ? ours : "SELECT ours, " + l.unlock_all + " FROM (" + ours + " OFFSET 0) " + std::string(alias);
}

void session_lock_statements(const Dialect& d, const Tables& t, LockStatements& s) {
  const SessionLock& l = d.session_lock;
  const std::string key = l.key ? l.key(t, ":key") : std::string(":lock");
  auto fill = [](Statement& slot, std::string id, std::string text) {
    if (slot.empty()) slot = {std::move(id), std::move(text)};
  };
  // A dialect that writes its own take writes its own take without waiting, or none (the take
  // with no wait then serves). Where the wait takes its bound as a parameter (no `bound`:
  // :wait_ms), the wait of 0 is the take without waiting: one statement serves both, named once.
  if (l.lock && !l.bound.empty() && s.advisory_wait.empty())
    fill(s.advisory_try, "lock.advisory_try", lock_sql(d, got(d, key, false), false));
  if (l.lock) fill(s.advisory_wait, "lock.advisory_wait", lock_sql(d, got(d, key, true), true));
  if (const std::string holds = holds_sql(d, key); !holds.empty())
    fill(s.advisory_holds, "lock.advisory_holds", "SELECT " + holds);
  // Else the heartbeat's proof is status's judgement of a holder (Dialect::session_holds), over
  // :key's row as this session records it: the server shows this session holding the key's lock.
  else if (l.lock && !d.session_id.empty() && d.session_holds("s.", t) != "0")
    fill(s.advisory_holds, "lock.advisory_holds",
         "SELECT " + d.session_holds("s.", t) + " FROM (SELECT :key AS name, 'advisory' AS strategy, CAST(" + d.session_id +
             " AS VARCHAR(64)) AS session_id) s");
  if (l.unlock)
    fill(s.advisory_give_back, "lock.advisory_give_back",
         l.unlock_all.empty() ? "SELECT " + l.unlock(key) : give_back_sql(l, key, "", "u"));
  if (!l.bound.empty()) fill(s.lock_wait, "lock.lock_timeout", "SELECT " + l.bound);
  // The lock and the row's numbering in one statement, where its parts may write (a
  // data-modifying WITH: Dialect::unsynced_commit) and the upsert can select its row from the
  // lock's answer (ON CONFLICT's): the lock first, then the clock, and the row numbered only when
  // the lock was taken. One row of (session.take's columns, taken). The take that does not
  // wait, refused, adds the key's row as the refusal reads it (`refused`), so that a contender
  // that finds the key held needs no read of its own (session_locker's busy()); a refused wait
  // ends in an error, which carries no row.
  if (d.clock.empty() || d.unsynced_commit.empty() || !upserts_on_conflict(d)) return;
  // The refused row is the key's, joined as r.
  const std::string refused = ", " + refused_sql(d, "r."), key_row = " LEFT JOIN " + t.locks + " r ON NOT k.got AND r.name = :key";
  auto numbered = [&](Statement& slot, std::string id, const Statement& lock, bool explains) {
    if (!lock.empty())
      fill(slot, std::move(id), "WITH k AS (" + lock.text + "), a AS (" +
                                    numbered_upsert_sql(d, t, " FROM k WHERE k.got", "k.at") + ") SELECT a.*, k.got" +
                                    (explains ? refused : "") + " FROM k LEFT JOIN a ON true" + (explains ? key_row : ""));
  };
  // The take that does not wait reads the failover gate itself, as the lease's take does, when
  // core bound no :fence (it read no gate on this connection yet): `g` has the record's fence
  // when the record names this server, no lock-delay is in force, it covers :ttl_ms and the
  // session is the one the handshake gave (:started_id; a pooler hands out another), and no row
  // otherwise: then nothing is locked or numbered, the flag says 2, and core reads the gate
  // apart (failover::admit_once), which may write the record. With a :fence, `g` is that, where
  // the record is (one core has read; a record gone since refuses, fail closed). `g` is read in
  // a subquery: ON CONFLICT's SET sees no FROM but the CTEs. So a run's first take, and a
  // contender refused, cost one round trip, not two.
  if (!d.incarnation.empty() && !s.advisory_try.empty()) {
    const std::string fence = ":fence", started = ":started_id";
    fill(s.advisory_numbered_try, "lock.advisory_numbered_try",
         "WITH g AS (SELECT COALESCE(" + fence + ", token) AS fence FROM " + t.locks + " WHERE name = :record AND (" +
             fence + " IS NOT NULL OR " + failover_open_conditions(d, "", "owner = " + d.incarnation) + " AND (" +
             started + " IS NULL OR " + d.session_id + " = " + started + "))), k AS (" + s.advisory_try.text +
             " FROM g), a AS (" +
             numbered_upsert_sql(d, t, " FROM k WHERE k.got", "k.at", "(SELECT fence FROM g)") +
             ") SELECT a.*, COALESCE(CAST(k.got AS int), 2)" + refused +
             " FROM (SELECT 1) o LEFT JOIN k ON true LEFT JOIN a ON true" + key_row);
  }
  numbered(s.advisory_numbered_try, "lock.advisory_numbered_try", s.advisory_try, true);
  numbered(s.advisory_numbered_wait, "lock.advisory_numbered_wait", s.advisory_wait, false);
  // The lock goes once the row is released (g reads u), before the commit: a waiter it lets in
  // numbers the row once this statement has committed (its upsert waits for the row's lock).
  if (l.unlock && !s.advisory_numbered_try.empty())
    fill(s.advisory_released, "lock.advisory_released",
         release_recorded(d, t, lease_statements(d, t).release, "lock.advisory_released",
                          "g AS MATERIALIZED (" + give_back_sql(l, key, " FROM (SELECT count(*) FROM u) r", "x") + ")")
             .text);
}

}  // namespace

bool wakes_by_session_lock(const SessionLock& l) { return l.holder && l.lock && l.unlock; }

WakeStatements wake_statements(const Dialect& d, const Tables& t) {
  const SessionLock& l = d.session_lock;
  if (!wakes_by_session_lock(l)) return {};
  const std::string wake = ":wake", queue = ":queue";
  WakeStatements s;
  s.wake_hold = {"wake.hold", "SELECT " + l.lock(wake, false) + ", " + l.unlock(queue)};
  // Giving back a lock this session does not hold changes nothing.
  s.wake_release = {"wake.release", "SELECT " + l.unlock(wake) + ", " + l.unlock(queue)};
  // The queue lock is asked for only when this session does not hold it already (a re-entrant
  // lock would count a second hold); CASE evaluates one branch. The head that was not woken
  // gives the queue lock back: its wait is over (core calls again, and it queues again), and a
  // semaphore waiter, which waits on another slot each time, must not keep the queue of one it
  // then does not take.
  s.wake_wait = {"wake.wait", "SELECT CASE WHEN " + held_by(l, queue, d.session_id) + " THEN CASE WHEN " + l.holder(wake) +
                                  " IS NOT NULL AND COALESCE(" + l.lock(wake, true) + ", 0) = 1 THEN 1 ELSE 0 * COALESCE(" +
                                  l.unlock(queue) + ", 0) END ELSE COALESCE(" + l.lock(queue, true) + ", 0) = 1 END, " +
                                  l.unlock(wake)};
  // lease.taken's read, and in its select list, evaluated for the row found only (no row: taken
  // over, no lock taken), wake_hold's work.
  s.taken_holding = {"wake.taken_holding", taken_sql(d, t, ", CASE WHEN :take_wake = 1 THEN " +
                                                               l.lock(wake, false) + " END, " + l.unlock(queue))};
  // Only the head waits (another waiter that came to try would hold the head back), and gives
  // the wake lock back at once: the take behind it takes it with the row where the row is taken.
  // The queue lock's holder is named (:head), not this session: a row lock's take runs in its
  // holder session, the queue held by its bookkeeping session. Sent with the take in one round
  // trip only where the dialect runs a block (Dialect::block); none elsewhere.
  if (d.block)
    s.wait_ahead = {"wake.wait_ahead", "SELECT CASE WHEN " + held_by(l, queue, ":head") + " THEN " +
                                           l.lock(wake, true) + " END AS got, " + l.unlock(wake)};
  return s;
}

QueueStatements queue_statements(const Dialect& d, std::string_view key) {
  const SessionLock& l = d.session_lock;
  if (!l.lock || !l.unlock) return {};
  // The handoff lock (:hand) is the one a lease take binds (the holder's take took it).
  return {{"queue.wait", lock_sql(d, l.lock(key, true), true)},
          {"queue.leave", "SELECT " + l.unlock(key)},
          {"queue.wait_ahead", lock_sql(d, l.lock(":hand", true), true, false)}};
}

LockStatements lock_statements(const Dialect& d, const Tables& t, LockStatements s, const Statement& session_take) {
  const std::string claim = " FROM " + t.claims + " WHERE name = :key AND kind = :kind";
  session_lock_statements(d, t, s);
  // Where no statement releases the row with the lock given back between (advisory_released)
  // and the key's lock is named from the key, the lease's release of the row gives the lock back
  // in the same statement once it found the row the holder's: the waiter it lets in finds the
  // row released (its upsert waits for this statement's commit). The lock is named from the
  // row's own name, so it is asked for that row only.
  const SessionLock& l = d.session_lock;
  if (l.key && l.unlock && s.advisory_released.empty() && s.advisory_release_row.empty())
    s.advisory_release_row = {"lock.advisory_release_row",
                              lease_statements(d, t).release.text + " AND " + l.unlock(l.key(t, "name"))};
  s.begin = d.begin;
  // for-update's lock: the key's claims row, locked until the transaction ends; a row (its
  // name) when taken. With it, once the row is locked (the select list is evaluated for a locked
  // row only), the holder's tag (SessionLock::tag) and, where waiters hear a release by the lock
  // alone (wake_statements), the key's wake name, which the holder keeps.
  const std::string tag = l.tag ? l.tag(t) : std::string();
  const std::string with_lock = (tag.empty() ? "" : ", " + l.lock(tag, false)) +
                                (wakes_by_session_lock(l) ? ", " + l.lock(":wake", false) : "");
  if (s.lock_claim.empty()) s.lock_claim = {"lock.claim", "SELECT name" + with_lock + claim + " FOR UPDATE"};
  if (!tag.empty() && s.untag.empty()) s.untag = {"lock.untag", "SELECT " + l.unlock(tag)};
  // txn-insert's claim. Where the dialect has a lock held to the transaction's end, its waiters
  // queue on the key's (its hash's halves, :hi and :lo: another lock than the session lock's on
  // the same hash) ahead of the INSERT, which the holder keeps until its transaction ends: a
  // release wakes the one waiter at the head of that queue, where on the unique index it would
  // wake them all. An attempt that must not wait (:wait_ms 0) tries the lock instead and inserts
  // nothing while another holds it: one statement for both, CASE evaluating the branch it takes.
  // A row answered (its name), the lock taken.
  if (s.insert_claim.empty() && l.transaction_lock)
    s.insert_claim = {"lock.insert_claim", "INSERT INTO " + t.claims + " (name, kind) SELECT :key, :kind WHERE CASE WHEN " +
                                               ":wait_ms > 0 THEN " + l.transaction_lock(":hi, :lo", true) +
                                               " ELSE " + l.transaction_lock(":hi, :lo", false) + " END" + d.returning("name")};
  if (s.insert_claim.empty())
    s.insert_claim = {"lock.insert_claim", "INSERT INTO " + t.claims + " (name, kind) VALUES (:key, :kind)"};
  // The key's claims row unless there is one, committed: an insert that leaves a racer's alone.
  s.make_claim = {"lock.make_claim", d.upsert({t.claims, "c", {{"name", ":key"}, {"kind", ":kind"}},
                                              [](std::string_view) { return Assignments(); },
                                              [](std::string_view) { return std::string(); }, ""})};
  if (!s.lock_claim.empty() && s.lock_claim_nowait.empty())
    s.lock_claim_nowait = {s.lock_claim.id + "_nowait", s.lock_claim.text + " NOWAIT"};
  // The uncommitted row is visible to its own transaction only, while it is open.
  s.holds_claim = {"lock.holds_claim", "SELECT count(*)" + claim};
  // A row lock lasts as long as its transaction, which lasts as long as the session: answered
  // while the session is.
  s.alive = {"lock.alive", "SELECT 1"};
  // The row lock's numbering, proven in the statement: the holder session as the row would
  // record it (status's judgement, Dialect::session_holds) shown holding the key's lock. Its
  // time is its own (Dialect::clock): it may run in a transaction begun by a wait before it.
  // A dialect whose session.take is its own (MariaDB's answers its row and reads the failover
  // gate) runs that take in a block, once the same proof holds: each statement of a block has
  // its own time. Not shown holding, the block answers nothing.
  // Where the server tells who holds a named lock and a row lock's holder keeps its tag
  // (SessionLock::holder, tag), the proof is shorter and as strong: the tag's holder is the lock
  // session (:lock_session, its server id, bound with the tag's name, :held, by the holder
  // session: HolderSession::send_numbering). The tag is taken with the row's lock (lock_claim's
  // select list, evaluated for a locked row only; txn-insert's `tag` after its INSERT), and its
  // name carries the session's random tag: no other session can hold it, and held, the row is
  // this session's.
  const std::string holder = "(SELECT :key AS name, :strategy AS strategy, :session_id AS session_id) s";
  const bool tagged = l.holder && l.tag;
  const std::string proof = tagged ? l.holder(":held") + " = :lock_session"
                                   : "(SELECT " + d.session_holds("s.", t) + " FROM " + holder + ") = 1";
  // The ON CONFLICT form's rows: the one that proves it.
  const std::string proven = tagged ? " WHERE " + proof : " FROM " + holder + " WHERE " + d.session_holds("s.", t) + " = 1";
  if (!d.session_id.empty() && upserts_on_conflict(d) && d.session_holds("s.", t) != "0")
    s.row_numbered = {"lock.row_numbered", numbered_upsert_sql(d, t, proven, d.clock.empty() ? d.now : d.clock)};
  else if (!d.session_id.empty() && d.block && !session_take.empty() && d.session_holds("s.", t) != "0")
    s.row_numbered = {"lock.row_numbered", d.block("", "IF " + proof + " THEN " + session_take.text + "; END IF;")};
  // A first attempt's numbering goes out with its lock statement, no gate ahead of it
  // (HolderSession::send_numbering): where the dialect runs a block, it waits behind this, which
  // looks for the grant's proof (row_numbered's) a millisecond at a time within :poll_ms, and
  // no longer once the key's wake name is taken (by a holder, another's, or this one's just
  // granted: then core numbers after the grant). It proves nothing itself: row_numbered does.
  // Its answer, after three columns, is the key's row as lease.refusal reads it (a name of NULL:
  // none), read once the wait is over: a run refused needs no read of its own to say who holds.
  if (!s.row_numbered.empty() && d.block && wakes_by_session_lock(l))
    s.grant_wait = {"lock.grant_wait", d.block("DECLARE w INT DEFAULT 0; ",
                                               "SET w = :poll_ms; WHILE w > 0 AND (" + proof + ") IS NOT TRUE AND " + l.holder(":wake") +
                                                   " IS NULL DO SET w = w - 1 + SLEEP(0.001); END WHILE; SELECT w, NULL, NULL, NULL, " +
                                                   refused_sql(d, "r.") + " FROM (SELECT 1 AS one) o LEFT JOIN " + t.locks +
                                                   " r ON r.name = :key;")};
  // The gate that chains the numbering to the grant: the holder keeps it while its lock statement
  // waits and lets it go right after a grant; the bookkeeping session's wait for it, bounded as
  // the holder's, gives it back at once, so nothing of it stays when the statement after it
  // fails. The wait is evaluated first: in a subquery kept apart by OFFSET 0 where a `bound` is
  // set in its FROM; where the wait takes its bound as a parameter (:wait_ms), it comes first in
  // the select list, which is evaluated left to right (as wake.wait_ahead's).
  if (!s.row_numbered.empty() && l.lock && l.unlock) {
    const std::string gate = ":gate";
    s.gate_take = {"lock.gate_take", lock_sql(d, l.lock(gate, true), false, false)};
    s.gate_wait = {"lock.gate_wait", l.bound.empty() ? lock_sql(d, l.lock(gate, true), true, false) + ", " + l.unlock(gate)
                                                     : "SELECT got, " + l.unlock(gate) + " FROM (" +
                                                           lock_sql(d, l.lock(gate, true), true, false) + " OFFSET 0) g"};
    s.gate_give = {"lock.gate_give", "SELECT " + l.unlock(gate)};
  }
  // The release and the history row in the holder's own transaction, which the COMMIT after it
  // ends: the row's release and the lock's end are one. Where its parts may write
  // (release_recorded) and the dialect has a clock: its times are the moment it runs (`now` is
  // the transaction's start there: the take). txn-insert's own claims row, which the end would
  // keep, goes in it (the only such row it sees: another's is uncommitted).
  if (s.row_release_ended.empty() && !d.clock.empty()) {
    Dialect at_release = d;
    at_release.now = d.clock;
    s.row_release_ended = release_recorded(at_release, t, lease_statements(at_release, t).release, "lock.row_release_ended",
                                           "own_claim AS (DELETE FROM " + t.claims +
                                               " WHERE name = :key AND kind = 'txn-insert'), g AS (SELECT true AS ours)");
  }
  // Where the dialect runs a block (Dialect::block) instead: the same work as its statements,
  // the COMMIT among them, and after it the holder tag (SessionLock::tag) and the key's wake name
  // given back, in that order, so the waiter it wakes finds the row released. One round trip,
  // where the release, the session's end and the history row were three. Any error rolls the
  // transaction back (the row lock goes with it) and is the block's: core releases the row apart.
  if (!d.block) return s;
  const std::string wake = wakes_by_session_lock(l) ? ", " + l.unlock(":wake") : "";
  const std::string record = "; " + history_trim_block_sql(d, t) + " COMMIT; SELECT released_rows > 0, ";
  if (s.row_release_ended.empty() && l.tag && l.unlock)
    s.row_release_ended = {"lock.row_release_ended",
                           d.block("DECLARE released_rows INT; ",
                                   lease_statements(d, t).release.text + "; GET DIAGNOSTICS released_rows = ROW_COUNT; DELETE FROM " +
                                       t.claims + " WHERE :strategy = 'txn-insert' AND name = :key AND kind = 'txn-insert'; " +
                                       run_row_sql(d, t, "TRUE") + record + "1, " + l.unlock(l.tag(t)) + wake + ";")};
  // Advisory's likewise, in a transaction it starts: the history row says 'lost' unless the
  // session held the key's lock (SessionLock::key, kept in `held`: a block's session lock is
  // named by a text, MariaDB's GET_LOCK name) to the end, which it gives back after the commit.
  if (s.advisory_released.empty() && l.key && l.unlock)
    s.advisory_released = {"lock.advisory_released",
                           d.block("DECLARE released_rows INT; DECLARE ours BOOLEAN; DECLARE held VARCHAR(255); ",
                                   d.begin + "; " + lease_statements(d, t).release.text +
                                       "; GET DIAGNOSTICS released_rows = ROW_COUNT; SET held = " + l.key(t, ":key") +
                                       "; SET ours = " + holds_sql(d, "held") + " = 1; " + run_row_sql(d, t, "ours") + record +
                                       "ours AND " + l.unlock("held") + " = 1" + wake + ";")};
  return s;
}

namespace {

// The record named `name` (SQL), its longest TTL `pid`, inserted unless there is one met through
// `key` (Upsert::key): two that make it at once race harmlessly, the second doing nothing.
Upsert record_insert(const Dialect& d, const Tables& t, std::string name, std::string pid, std::string key) {
  return {t.locks,
          "l",
          Assignments{{"name", std::move(name)}, {"owner", d.incarnation}, {"host", "NULL"}, {"pid", std::move(pid)},
                      {"token", "0"}, {"strategy", "'failover'"}, {"acquired_at", d.now}},
          [](std::string_view) { return Assignments(); },
          [](std::string_view) { return std::string(); },
          std::move(key)};
}

}  // namespace

std::string failover_record_sql(const Dialect& d, const Tables& t) {
  if (d.incarnation.empty()) return {};
  const std::string_view name = failover::record_name;
  return d.upsert(record_insert(
      d, t, "CONCAT(CHR(" + std::to_string(static_cast<int>(name[0])) + "), '" + std::string(name.substr(1)) + "')", "0", ""));
}

SchemaStatements schema_statements(const Dialect& d, const tables::SchemaDialect& sd, const BackendOptions& options,
                                   std::string_view dialect_name, std::span<const Strategy> strategies) {
  SchemaStatements s = tables::schema_statements(sd, options, dialect_name, strategies);
  s.failover_record = failover_record_sql(d, Tables(options.table_prefix, sd.quote));
  // CREATE TABLE IF NOT EXISTS races on a catalog (PostgreSQL's: a unique violation on pg_type)
  // when several processes create at once: where the dialect has a lock held to the
  // transaction's end, they take turns on one, its key a number computed here (no key's: no key
  // holds a control character), not user text. In the dialect's `begin`, READ COMMITTED: the
  // shape read after the CREATEs must see a table a racer committed while this one waited for
  // the lock, which a REPEATABLE READ or SERIALIZABLE snapshot (taken by the lock's SELECT,
  // before the wait) would not.
  if (d.session_lock.transaction_lock)
    s.begin = d.begin + "; SELECT " +
              d.session_lock.transaction_lock(std::to_string(key_hash(options.table_prefix, "\x01schema")), true);
  return s;
}

// The record is a row of <prefix>locks: owner the incarnation recorded, host the previous one,
// token the fence, expires_at the end of the lock-delay, pid the longest TTL in ms.
FailoverStatements failover_statements(const Dialect& d, const Tables& t) {
  FailoverStatements f;
  const std::string& now_incarnation = d.incarnation;
  if (now_incarnation.empty()) return f;
  const std::string ttl = ":ttl_ms";
  auto flag = [](const std::string& cond) { return "CASE WHEN " + cond + " THEN 1 ELSE 0 END"; };
  const std::string serving = d.serving ? d.serving(t) : std::string();
  // Also who serves the session and whether it is a Galera node (Dialect::session_id, serving),
  // which a session strategy asks before its first take (SqlBackend::serving_check).
  f.read = {"failover.read", "SELECT r.owner, c.incarnation_now, r.host, r.token, " + epoch_ms_sql(d, "r.expires_at") + ", " +
                                 epoch_ms_sql(d, d.now) + ", r.pid, " + flag("r.owner = c.incarnation_now") + ", " +
                                 flag(failover_delayed_sql(d, "r.")) + ", " + flag(failover_covers_sql("r.")) +
                                 (d.session_id.empty() ? "" : ", " + d.session_id + ", " + (serving.empty() ? "0" : serving)) +
                                 " FROM (SELECT " + now_incarnation +
                                 " AS incarnation_now) c LEFT JOIN " + t.locks + " r ON r.name = :record"};
  f.create = {"failover.create", d.upsert(record_insert(d, t, ":record", ttl, "name"))};
  f.max_token = {"failover.max_token", "SELECT max(token) FROM " + t.locks + " WHERE name <> :record"};
  // host takes the old owner before owner changes (MySQL assigns left to right).
  f.move = {"failover.move", "UPDATE " + t.locks + " SET host = owner, owner = " + now_incarnation +
                                 ", token = :fence, acquired_at = " + d.now +
                                 ", expires_at = " + d.plus_ms(d.now, "pid") + " WHERE name = :record AND owner <> " +
                                 now_incarnation};
  f.raise_ttl = {"failover.raise_ttl",
                 "UPDATE " + t.locks + " SET pid = " + ttl + " WHERE name = :record AND pid < " + ttl};
  return f;
}

}  // namespace dblock::sql

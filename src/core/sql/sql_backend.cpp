#include "core/sql/lock_rows.hpp"
#include "core/sql/sql_backend.hpp"

#include <algorithm>
#include <thread>

#include "core/clock.hpp"
#include "core/semaphore.hpp"
#include "core/sql/failover.hpp"
#include "core/sql/identifiers.hpp"
#include "core/sql/inspect.hpp"
#include "core/sql/lease_locker.hpp"
#include "core/sql/pooler.hpp"
#include "core/sql/schema.hpp"
#include "core/sql/shedlock_locker.hpp"
#include "core/sql/tables.hpp"

namespace dblock::sql {

SqlBackend::SqlBackend(std::string_view name, BackendOptions options, Statements<LeaseStatements> lease,
                       Statements<ShedlockStatements> shedlock, Statements<InspectStatements> inspect,
                       SchemaStatements schema, Statements<ReleaseStatements> release, DoctorStatements doctor)
    : options_(std::move(options)),
      inspect_(std::move(inspect)),
      name_(name),
      lease_(std::move(lease)),
      shedlock_(std::move(shedlock)),
      release_(std::move(release)),
      doctor_(std::move(doctor)),
      schema_(std::make_shared<const SchemaStatements>(std::move(schema))) {}

Result<void> SqlBackend::ensure_schema() {
  auto s = session();
  if (!s) return std::unexpected(s.error());
  return sql::ensure_schema(**s);
}

Result<void> SqlBackend::check_schema() {
  auto s = session();
  if (!s) return std::unexpected(s.error());
  return sql::check_schema(**s);
}

Result<std::unique_ptr<Locker>> SqlBackend::make_locker(Strategy strategy) {
  // A session strategy is refused where its lock could not hold (doctor fails the same set-ups)
  // on the failover record's read, before its first take (serving_check).
  if (strategy != Strategy::lease) return make_session_locker(strategy);
  // The locker shares this Backend's session (backend.hpp: the Backend is not used after
  // make_locker): a lease run costs one connection.
  auto s = session();
  if (!s) return std::unexpected(s.error());
  if (options_.shedlock)
    return make_shedlock_locker(*s, shedlock_.get(), lease_.get(), options_.history_keep, options_.shedlock_table);
  return make_lease_locker(*s, lease_.get(), options_.table_prefix, options_.history_keep);
}

failover::ReadCheck SqlBackend::serving_check(Strategy strategy,
                                              std::function<Result<std::unique_ptr<Session>>()> open_other) const {
  if (!is_session_strategy(strategy) || doctor_.session_id.empty()) return {};
  return [strategy, session_id = doctor_.session_id, open_other = std::move(open_other)](Session& s, const Rows::Row& row) {
    return session_strategy_answered(s, row, failover::session_column, "failover.read", session_id, strategy, open_other);
  };
}

Result<std::vector<LockStatus>> SqlBackend::status(std::span<const std::string> keys) {
  auto s = session();
  if (!s) return std::unexpected(s.error());
  const StatusDecoder decode = options_.shedlock ? &shedlock_holder : &decode_status_row;
  auto found = read_status(**s, inspect_.get(), keys, decode);
  if (found) return found;
  if (auto older = older_statements(**s, found.error())) found = read_status(**s, *older, keys, decode);
  if (!found) return explained(**s, found.error());
  return found;
}

std::optional<InspectStatements> SqlBackend::older_statements(Session& session, const Error& failed) {
  // Only inspection: a run or `init` adds the column instead (ensure_schema).
  const InspectStatements& inspect = inspect_.get();
  if (!inspect.older || !options_.inspect || options_.shedlock || failed.kind != ErrorKind::schema_missing)
    return std::nullopt;
  auto columns = read_columns(session);
  if (!columns) return std::nullopt;
  auto has = [&](const std::string& table, const std::string& column) {
    auto t = columns->find(table);
    return t != columns->end() && t->second.columns.contains(column);
  };
  auto lacks = [](const InspectStatements& shape, const SchemaStatements::Added& added) {
    return std::ranges::find(shape.lacks, std::pair(added.table, added.column)) != shape.lacks.end();
  };
  // The newest older shape whose tables have every required column but those it lacks; none
  // when the tables lack no required column (the failure is something else's).
  if (std::ranges::all_of(schema_->added, [&](const auto& a) { return !a.described->required || has(a.table, a.column); }))
    return std::nullopt;
  for (const InspectStatements* shape = inspect.older.get(); shape; shape = shape->older.get())
    if (std::ranges::all_of(schema_->added,
                            [&](const auto& a) { return !a.described->required || lacks(*shape, a) || has(a.table, a.column); }))
      return *shape;
  return std::nullopt;
}

Result<int> SqlBackend::slot_count(const std::string& key) {
  if (options_.shedlock) return 0;
  auto s = session();
  if (!s) return std::unexpected(s.error());
  auto slots = read_slot_count(**s, inspect_.get(), key);
  // No table, or a table from before semaphores without the column: no semaphore there, and
  // inspection adds nothing.
  if (!slots && slots.error().kind == ErrorKind::schema_missing) return 0;
  return slots;
}

Result<std::vector<RunRecord>> SqlBackend::history(const std::string& key, int limit) {
  auto s = session();
  if (!s) return std::unexpected(s.error());
  auto runs = read_history(**s, inspect_.get(), key, limit);
  if (!runs)
    if (auto older = older_statements(**s, runs.error())) runs = read_history(**s, *older, key, limit);
  if (!runs) return explained(**s, runs.error());
  return runs;
}

Result<std::int64_t> SqlBackend::renew(const std::string& key, const HolderSelector& who, Millis ttl) {
  auto s = session();
  if (!s) return std::unexpected(s.error());
  // Before the lease is longer than any recorded: a replica that has the renewal has this too.
  // On a new primary the lock-delay starts here, as a heartbeat's renewal starts it.
  if (auto seen = failover::notice(**s, lease_.get().failover, ttl); !seen) return std::unexpected(seen.error());
  return renew_named(**s, inspect_.get(), key, who, ttl);
}

Result<std::int64_t> SqlBackend::now_ms() {
  auto s = session();
  if (!s) return std::unexpected(s.error());
  return read_now_ms(**s, inspect_.get());
}

Result<void> SqlBackend::release(const std::string& key, const HolderSelector& who) {
  if (!who.force && !who.owner && !who.token)
    return fail(ErrorKind::usage, "release needs the holder's owner or token, or --force");
  if (!options_.shedlock) {
    auto released = release_held(key, who);
    // The key's waiters hear it as they hear a holder's own release (a dialect whose release
    // statement tells them, :channel, does nothing more here); with --force on a free key, one
    // waiter at most tries once more for nothing.
    if (released)
      if (auto s = session()) (*s)->release_signal().released(std::string(key_of_row(key)));
    return released;
  }
  auto s = session();
  if (!s) return std::unexpected(s.error());
  return release_shedlock(**s, shedlock_.get(), key, who);
}

Result<void> SqlBackend::release_held(const std::string& key, const HolderSelector& who) {
  auto s = session();
  if (!s) return std::unexpected(s.error());
  Session& session = **s;
  const ReleaseStatements& st = release_.get();
  const Params named{{"key", key},
                     {"owner", who.owner ? Value(*who.owner) : Value()},
                     {"token", value_of(who.token)},
                     {"force", std::int64_t{who.force ? 1 : 0}},
                     {"channel", release_channel(options_.table_prefix, key_of_row(key))}};
  Result<Rows> holder = Rows();
  if (!st.holder.empty()) holder = session.run(st.holder, named);
  if (!holder) return std::unexpected(holder.error());
  auto marked = session.run(st.release, named);
  if (!marked) return std::unexpected(marked.error());
  // --force wants the key free; a key nobody holds already is.
  if (marked->affected == 0 && !who.force)
    return fail(ErrorKind::lost, "'" + key + "' is not held by " + rows::describe(who));
  const Rows& found = st.holder.empty() ? *marked : *holder;
  if (found.empty() || found[0].is_null(0)) return {};

  // A session lock lives in its holder's session: the only way to free it from outside is to
  // end that session (its run then finds the lock lost and exits 76). Only a session the
  // server shows holding the key's lock is ended, asked again as it is ended: servers hand
  // session ids out again.
  const std::int64_t id = found[0].int64(0);
  const Params holding{{"session", id},
                       {"lock", found[0].is_null(1) ? Value() : Value(found[0].text(1))},
                       {"key", key}};
  const std::string marked_released = "marked '" + key + "' released, but ";
  if (!st.end_session.empty())
    if (auto ended = session.run(st.end_session, holding);
        !ended && ended.error().kind != ErrorKind::no_session)
      return fail(ended.error().kind == ErrorKind::connection ? ErrorKind::connection : ErrorKind::other,
                  marked_released + "could not end its holder's session " + std::to_string(id) + ": " +
                      ended.error().message);
  // Ending a session returns before it has rolled back and let its locks go (MariaDB's KILL,
  // PostgreSQL's signal): the caller may take the key at once, so wait until they are gone.
  const Millis deadline = boottime_now() + options_.io_timeout;
  for (;;) {
    auto gone = session.run(st.session_gone, holding);
    if (!gone) return std::unexpected(gone.error());
    if (!gone->empty() && (*gone)[0].int64(0) == 1) return {};
    if (boottime_now() >= deadline)
      return fail(ErrorKind::connection, marked_released + "its holder's session " + std::to_string(id) +
                                             " had not ended within the I/O timeout");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::vector<DoctorCheck> SqlBackend::doctor_checks(Strategy strategy) {
  auto s = session();
  if (!s) return {{"server", false, s.error().message}};
  Session& session = **s;
  std::vector<DoctorCheck> out;
  auto server = session.run(doctor_.server, {});
  if (!server || server->empty()) return {{"server", false, server ? "the server said nothing" : server.error().message}};
  out.push_back({"server", true, (*server)[0].text(0) + " at " + session.where()});
  if (auto transport = session.transport()) out.push_back(transport_check(*transport));
  out.push_back(check_privileges(session, strategy));
  const Params asked{{"session", std::int64_t{is_session_strategy(strategy) ? 1 : 0}},
                     {"strategy", std::string(to_string(strategy))}};
  for (const Statement& st : doctor_.checks) {
    auto r = session.run(st, asked);
    if (!r) out.push_back({st.id, false, r.error().message});
    else
      for (std::size_t i = 0; i < r->size(); ++i) out.push_back({(*r)[i].text(0), (*r)[i].int64(1) == 1, (*r)[i].text(2)});
  }
  if (!doctor_.session_id.empty())
    out.push_back(pooler_check(session, doctor_.session_id, strategy, [this] { return another_session(); }));
  out.push_back(failover::doctor_check(session, lease_.get().failover));
  return out;
}

namespace {

// An INSERT of one row into `table` (quoted `quoted`) with only what the table requires: each
// column that is NOT NULL without a default (the description's, tables.hpp), the name :probe.
Statement insert_probe(const tables::Table& table, const std::string& quoted) {
  std::string columns, values;
  for (const tables::Column& c : table.columns) {
    if (!c.not_null || !c.default_sql.empty() || c.type == tables::Type::id) continue;
    columns += (columns.empty() ? "" : ", ") + std::string(c.name);
    const bool number = c.type == tables::Type::int64 || c.type == tables::Type::int32;
    values += std::string(values.empty() ? "" : ", ") +
              (c.type == tables::Type::name ? ":probe" : number ? "0" : "'doctor'");
  }
  return {"doctor.probe", "INSERT INTO " + quoted + " (" + columns + ") VALUES (" + values + ")"};
}

}  // namespace

std::vector<PrivilegeProbe> privilege_probes(const BackendOptions& options, char quote) {
  using Needed = PrivilegeProbe::Needed;
  const Tables t(options.table_prefix, quote);
  const std::string locks = options.table_prefix + "locks", runs = options.table_prefix + "runs",
                    claims = options.table_prefix + "claims";
  // An INSERT writes a row (rolled back); the others touch none (WHERE 1 = 0) and read no
  // column, so each needs its own privilege only.
  std::vector<PrivilegeProbe> out{
      {"SELECT", locks, "status and every run", Needed::always, {"doctor.probe", "SELECT 1 FROM " + t.locks + " WHERE 1 = 0"}},
      {"INSERT", locks, "a key's first run", Needed::always, insert_probe(tables::locks, t.locks)},
      {"UPDATE", locks, "every run", Needed::always,
       {"doctor.probe", "UPDATE " + t.locks + " SET owner = NULL WHERE 1 = 0"}},
      {"SELECT", runs, "history", Needed::always, {"doctor.probe", "SELECT 1 FROM " + t.runs + " WHERE 1 = 0"}},
      {"INSERT", runs, "every run's history row", Needed::always, insert_probe(tables::runs, t.runs)},
      {"DELETE", runs, "trimming history to --history-keep", Needed::always,
       {"doctor.probe", "DELETE FROM " + t.runs + " WHERE 1 = 0"}},
      {"SELECT", claims, "for-update and txn-insert", Needed::claims,
       {"doctor.probe", "SELECT 1 FROM " + t.claims + " WHERE 1 = 0"}},
      {"INSERT", claims, "for-update and txn-insert", Needed::claims, insert_probe(tables::claims, t.claims)},
      // PostgreSQL's SELECT ... FOR UPDATE needs UPDATE; MariaDB's SELECT alone (the probe asks the server).
      {"UPDATE", claims, "for-update's SELECT ... FOR UPDATE", Needed::for_update,
       {"doctor.probe", "SELECT 1 FROM " + t.claims + " WHERE 1 = 0 FOR UPDATE"}},
  };
  if (options.shedlock) {
    const std::string shed = quote_identifier(options.shedlock_table, quote);
    out.push_back({"SELECT", options.shedlock_table, "ShedLock's table", Needed::shedlock,
                   {"doctor.probe", "SELECT 1 FROM " + shed + " WHERE 1 = 0"}});
    out.push_back({"INSERT", options.shedlock_table, "ShedLock's table", Needed::shedlock,
                   {"doctor.probe", "INSERT INTO " + shed +
                                        " (name, lock_until, locked_at, locked_by) VALUES (:probe, CURRENT_TIMESTAMP,"
                                        " CURRENT_TIMESTAMP, 'doctor')"}});
    out.push_back({"UPDATE", options.shedlock_table, "ShedLock's table", Needed::shedlock,
                   {"doctor.probe", "UPDATE " + shed + " SET locked_by = 'doctor' WHERE 1 = 0"}});
  }
  return out;
}

DoctorCheck SqlBackend::check_privileges(Session& session, Strategy strategy) {
  using Needed = PrivilegeProbe::Needed;
  std::string granted, missing, other;
  bool tables_missing = false;
  for (const PrivilegeProbe& p : doctor_.probe) {
    if (p.needed == Needed::claims && strategy != Strategy::for_update && strategy != Strategy::txn_insert) continue;
    if (p.needed == Needed::for_update && strategy != Strategy::for_update) continue;
    if (p.needed == Needed::shedlock && !options_.shedlock) continue;
    Result<Rows> r = Rows();
    {
      // Each in a transaction of its own, rolled back: one refused leaves the next a clean one.
      auto tx = Transaction::begin(session, lease_.get().begin);
      if (!tx) return {"privileges", false, tx.error().message};
      // A key holds no control character, so the probe never meets a real row.
      r = session.run(p.statement, {{"probe", std::string("\x01" "dblock-doctor")}});
    }
    const std::string what = p.privilege + " on " + p.table;
    if (r) granted += (granted.empty() ? "" : ", ") + what;
    else if (r.error().kind == ErrorKind::schema_missing) tables_missing = true;
    else if (r.error().kind == ErrorKind::denied) missing += (missing.empty() ? "" : ", ") + what + " (" + p.why + ")";
    else other += (other.empty() ? "" : "; ") + what + ": " + r.error().message;
  }
  // Refused for the duplicate column (other), not for want of the privilege (denied) or of a
  // schema to create in (config): the account may create tables there.
  auto create = session.run(doctor_.can_create, {});
  const bool can_create = !create && create.error().kind == ErrorKind::other;
  // Doctor only looks: tables that are not there yet are the tables check's finding; here what
  // matters is whether the first run (or `dblock init`) may create them.
  if (tables_missing && missing.empty() && other.empty())
    return {"privileges", can_create,
            can_create ? "the dblock tables do not exist yet; the CREATE privilege lets the first run or `dblock init` make them"
                       : "the dblock tables do not exist and no CREATE privilege is seen, so a DBA makes them (`dblock "
                         "schema` prints the DDL)"};
  if (!missing.empty())
    return {"privileges", false, "missing for " + std::string(to_string(strategy)) + ": " + missing +
                                     "; GRANT what is missing to this user (dblock(1) PRIVILEGES lists what each strategy needs)"};
  if (!other.empty()) return {"privileges", false, "a privilege probe failed: " + other};
  return {"privileges", true,
          granted + (can_create ? "; CREATE too"
                                : "; no CREATE privilege seen, so a DBA makes the tables (`dblock schema` prints the DDL)")};
}

std::unexpected<Error> SqlBackend::explained(Session& session, const Error& failed) {
  if (failed.kind != ErrorKind::schema_missing) return std::unexpected(failed);
  if (auto shape = sql::check_schema(session); !shape) return std::unexpected(shape.error());
  return std::unexpected(failed);
}

}  // namespace dblock::sql

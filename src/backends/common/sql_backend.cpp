#include "backends/common/sql_backend.hpp"

#include <thread>

#include "backends/common/identifiers.hpp"
#include "backends/common/inspect.hpp"
#include "backends/common/lease_locker.hpp"
#include "backends/common/schema.hpp"
#include "backends/common/shedlock_locker.hpp"
#include "core/clock.hpp"
#include "core/semaphore.hpp"

namespace dblock::sql {

SqlBackend::SqlBackend(std::string_view name, BackendOptions options, LeaseStatements lease, ShedlockStatements shedlock,
                       InspectStatements inspect, SchemaStatements schema, ReleaseStatements release)
    : options_(std::move(options)),
      inspect_(std::move(inspect)),
      name_(name),
      lease_(std::move(lease)),
      shedlock_(std::move(shedlock)),
      release_(std::move(release)),
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
  if (strategy != Strategy::lease) return make_session_locker(strategy);
  // The locker shares this Backend's session (backend.hpp: the Backend is not used after
  // make_locker): a lease run costs one connection.
  auto s = session();
  if (!s) return std::unexpected(s.error());
  if (options_.shedlock) return make_shedlock_locker(*s, shedlock_, lease_, options_.history_keep);
  return make_lease_locker(*s, lease_, options_.table_prefix, options_.history_keep);
}

Result<std::vector<LockStatus>> SqlBackend::status(std::span<const std::string> keys) {
  auto s = session();
  if (!s) return std::unexpected(s.error());
  auto found = read_status(**s, inspect_, keys, options_.shedlock ? &shedlock_holder : &decode_status_row);
  if (!found) return explained(**s, found.error());
  return found;
}

Result<int> SqlBackend::slot_count(const std::string& key) {
  if (options_.shedlock) return 0;
  auto s = session();
  if (!s) return std::unexpected(s.error());
  auto slots = read_slot_count(**s, inspect_, key);
  // No table, or a table from before semaphores without the column: no semaphore there, and
  // inspection adds nothing.
  if (!slots && (*s)->schema_missing(slots.error())) return 0;
  return slots;
}

Result<std::vector<RunRecord>> SqlBackend::history(const std::string& key, int limit) {
  auto s = session();
  if (!s) return std::unexpected(s.error());
  auto runs = read_history(**s, inspect_, key, limit);
  if (!runs) return explained(**s, runs.error());
  return runs;
}

Result<std::int64_t> SqlBackend::renew(const std::string& key, const HolderSelector& who, Millis ttl) {
  auto s = session();
  if (!s) return std::unexpected(s.error());
  return renew_named(**s, inspect_, key, who, ttl);
}

Result<std::int64_t> SqlBackend::now_ms() {
  auto s = session();
  if (!s) return std::unexpected(s.error());
  return read_now_ms(**s, inspect_);
}

Result<void> SqlBackend::release(const std::string& key, const HolderSelector& who) {
  if (!who.force && !who.owner && !who.token)
    return fail(ErrorKind::usage, "release needs the holder's owner or token, or --force");
  if (!options_.shedlock) return release_held(key, who);
  auto s = session();
  if (!s) return std::unexpected(s.error());
  return release_shedlock(**s, shedlock_, key, who);
}

Result<void> SqlBackend::release_held(const std::string& key, const HolderSelector& who) {
  auto s = session();
  if (!s) return std::unexpected(s.error());
  Session& session = **s;
  const Params named{{"key", key},
                     {"owner", who.owner ? Value(*who.owner) : Value()},
                     {"token", value_of(who.token)},
                     {"force", std::int64_t{who.force ? 1 : 0}},
                     {"channel", release_channel(options_.table_prefix, key_of_row(key))}};
  Result<Rows> holder = Rows();
  if (!release_.holder.empty()) holder = session.run(release_.holder, named);
  if (!holder) return std::unexpected(holder.error());
  auto marked = session.run(release_.release, named);
  if (!marked) return std::unexpected(marked.error());
  // --force wants the key free; a key nobody holds already is.
  if (marked->affected == 0 && !who.force)
    return fail(ErrorKind::lost, "'" + key + "' is not held by " + rows::describe(who));
  const Rows& found = release_.holder.empty() ? *marked : *holder;
  if (found.empty() || found[0].is_null(0)) return {};

  // A session lock lives in its holder's session: the only way to free it from outside is to
  // end that session (its run then finds the lock lost and exits 76). Only a session the
  // server shows holding the key's lock is ended, asked again as it is ended: servers hand
  // session ids out again.
  const std::int64_t id = found[0].int64(0);
  const Params holding{{"session", id}, {"lock", found[0].is_null(1) ? Value() : Value(found[0].text(1))}};
  const std::string marked_released = "marked '" + key + "' released, but ";
  if (!release_.end_session.empty())
    if (auto ended = session.run(release_.end_session, holding);
        !ended && !(release_.ended_already && release_.ended_already(ended.error())))
      return fail(ended.error().kind == ErrorKind::connection ? ErrorKind::connection : ErrorKind::other,
                  marked_released + "could not end its holder's session " + std::to_string(id) + ": " +
                      ended.error().message);
  // Ending a session returns before it has rolled back and let its locks go (MariaDB's KILL,
  // PostgreSQL's signal): the caller may take the key at once, so wait until they are gone.
  const Millis deadline = boottime_now() + options_.io_timeout;
  for (;;) {
    auto gone = session.run(release_.session_gone, holding);
    if (!gone) return std::unexpected(gone.error());
    if (!gone->empty() && (*gone)[0].int64(0) == 1) return {};
    if (boottime_now() >= deadline)
      return fail(ErrorKind::connection, marked_released + "its holder's session " + std::to_string(id) +
                                             " had not ended within the I/O timeout");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::unexpected<Error> SqlBackend::explained(Session& session, const Error& failed) {
  if (!session.schema_missing(failed)) return std::unexpected(failed);
  if (auto shape = sql::check_schema(session); !shape) return std::unexpected(shape.error());
  return std::unexpected(failed);
}

}  // namespace dblock::sql

#include "backends/common/sql_backend.hpp"

#include "backends/common/inspect.hpp"
#include "backends/common/lease_locker.hpp"
#include "backends/common/schema.hpp"
#include "backends/common/shedlock_locker.hpp"

namespace dblock::sql {

SqlBackend::SqlBackend(std::string_view name, BackendOptions options, LeaseStatements lease, ShedlockStatements shedlock,
                       InspectStatements inspect, SchemaStatements schema)
    : options_(std::move(options)),
      inspect_(std::move(inspect)),
      name_(name),
      lease_(std::move(lease)),
      shedlock_(std::move(shedlock)),
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
  // Before the lease is longer than any recorded: a replica that has the renewal has this too.
  if (auto covered = failover::cover_ttl(**s, lease_.failover, ttl); !covered) return std::unexpected(covered.error());
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

std::unexpected<Error> SqlBackend::explained(Session& session, const Error& failed) {
  if (!session.schema_missing(failed)) return std::unexpected(failed);
  if (auto shape = sql::check_schema(session); !shape) return std::unexpected(shape.error());
  return std::unexpected(failed);
}

}  // namespace dblock::sql

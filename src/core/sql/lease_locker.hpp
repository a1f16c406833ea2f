#pragma once
// The lease strategy, once for every backend: a row per key with an expiry, taken by one
// conditional statement, renewed by the heartbeat, released by an owner- and token-checked
// update with its history row. The dialect supplies the statements (statements.hpp) and the
// session; this file owns every decision.

#include <memory>
#include <string>

#include "core/locker.hpp"
#include "core/sql/statements.hpp"

namespace dblock::sql {

/// The lease locker on `session`, which it shares with the Backend that made it (the Backend is
/// not used while the locker lives). `prefix` is the table prefix (release_channel), `keep` the
/// history rows kept per key.
std::unique_ptr<Locker> make_lease_locker(std::shared_ptr<Session> session, const LeaseStatements& statements,
                                          std::string prefix, int keep);

/// `attempt` once, and once more after session.repair_schema() made the missing schema: the run
/// path assumes the tables (backend.hpp, make_locker). Each attempt cleans up after itself.
template <class F>
auto with_schema(Session& session, F&& attempt) -> decltype(attempt()) {
  auto first = attempt();
  if (first) return first;
  auto repaired = session.repair_schema(first.error());
  if (!repaired) return std::unexpected(repaired.error());
  if (!*repaired) return first;
  return attempt();
}

/// How often with_retry runs a statement that the server rolled back as a conflict.
inline constexpr int conflict_attempts = 4;

/// `statement` once, once more after a reconnect when the connection failed (a lease survives
/// a short outage), and again, up to conflict_attempts in all, when the server rolled it back
/// as a conflict (busy: a deadlock, or a Galera certification failure against another node's
/// write of the same rows). Every statement after the acquisition is compared on its holder,
/// so running it again is safe.
template <class F>
auto with_retry(Session& session, F&& statement) -> decltype(statement()) {
  auto result = statement();
  for (int conflicts = 1; !result && held_elsewhere(result.error().kind) && conflicts < conflict_attempts; ++conflicts)
    result = statement();
  if (result || result.error().kind != ErrorKind::connection) return result;
  if (auto ok = session.reconnect(result.error()); !ok) return std::unexpected(ok.error());
  return statement();
}

}  // namespace dblock::sql

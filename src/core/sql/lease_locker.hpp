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

}  // namespace dblock::sql

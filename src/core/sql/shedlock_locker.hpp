#pragma once
// --table-format shedlock, once for every backend (statements.hpp, ShedlockStatements).

#include <memory>

#include "core/locker.hpp"
#include "core/sql/statements.hpp"

namespace dblock::sql {

/// The lease locker on ShedLock's table `table` (--table), on `session` (shared with the Backend,
/// as the lease locker's). `history` gives the history statements; `keep` the history rows kept
/// per key.
std::unique_ptr<Locker> make_shedlock_locker(std::shared_ptr<Session> session, const ShedlockStatements& statements,
                                             const LeaseStatements& history, int keep, std::string table);

/// `dblock release` of a ShedLock row from another process: ShedLock's unlock on the named holder
/// (--force: whoever holds it); ErrorKind::lost when it holds nothing (unless who.force). The
/// caller has checked that `who` names someone.
Result<void> release_shedlock(Session& session, const ShedlockStatements& st, const std::string& key,
                              const HolderSelector& who);

/// A row of ShedlockStatements::holder as status shows it: held while lock_until is ahead (also
/// while lockAtLeastFor keeps a finished run's lock).
LockStatus shedlock_holder(const rows::ColumnReader& row);

}  // namespace dblock::sql

#pragma once
// status, history, the database clock and `dblock renew` of another process's lease, once for
// every backend, on a dialect's InspectStatements (statements.hpp).

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/sql/statements.hpp"

namespace dblock::sql {

/// A status row as the table format reads it (lock_rows.hpp, or ShedLock's holder).
using StatusDecoder = LockStatus (*)(const rows::ColumnReader& row);
/// The 14 status columns judged with the live and session_holds columns after them.
LockStatus decode_status_row(const rows::ColumnReader& row);

/// Every lock (keys empty) or the given keys, in the order asked; a key never taken is free.
Result<std::vector<LockStatus>> read_status(Session& session, const InspectStatements& st, std::span<const std::string> keys,
                                            StatusDecoder decode = &decode_status_row);
/// The newest `limit` runs (all when limit <= 0) of `key` (every key when empty), newest first.
Result<std::vector<RunRecord>> read_history(Session& session, const InspectStatements& st, const std::string& key,
                                            int limit);
Result<std::int64_t> read_now_ms(Session& session, const InspectStatements& st);
/// The count a semaphore's header row records; 0 for any other key.
Result<int> read_slot_count(Session& session, const InspectStatements& st, const std::string& key);
/// `dblock renew`: the named holder's new expiry; ErrorKind::lost when it holds nothing.
Result<std::int64_t> renew_named(Session& session, const InspectStatements& st, const std::string& key,
                                 const HolderSelector& who, Millis ttl);

}  // namespace dblock::sql

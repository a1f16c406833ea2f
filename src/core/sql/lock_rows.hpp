#pragma once
// The row layer every backend shares: which columns of <prefix>locks and <prefix>runs status
// and history read, in which order, how a row becomes LockStatus / RunRecord, and the state
// rule of docs/backend-contract.md (States). A backend supplies only its dialect (how a
// timestamp becomes epoch ms, what the server says about a holder) and a few lines that read
// one column of its own result rows.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/lock_types.hpp"
#include "core/sql/sql_session.hpp"
#include "core/sql/tables.hpp"

namespace dblock::rows {

/// A dialect's SQL for a timestamp column (or expression) as milliseconds since the epoch; NULL stays NULL.
using EpochMs = std::function<std::string(std::string_view expr)>;

/// The SELECT list (without SELECT) of the <prefix>locks columns status reads (tables.hpp,
/// Column::status), in the order decode_status() reads them, each timestamp as epoch ms, then
/// database now. `now_expr` is the dialect's current time as a timestamp. A backend appends its
/// own columns after these, from index status_column_count.
std::string status_select_list(const EpochMs& epoch_ms, std::string_view now_expr);
/// status_select_list() as a take that refused reads the row that refused it (its holder, its
/// state, when it may start: lock_steps.cpp, refused()), over the row `row` ("" or an alias and
/// its dot): NULL for a Column::past.
std::string refusal_select_list(const EpochMs& epoch_ms, std::string_view now_expr, std::string_view row = "");
inline constexpr int status_column_count = sql::tables::status_columns() + 1;

/// What only the database can judge about a row's holder. The row's strategy picks which counts.
struct HolderVerdict {
  bool lease_live = false;     // lease: the lease ends in the future (SQLite judges it on CLOCK_BOOTTIME, in SQL)
  bool session_holds = false;  // session strategies: the server says the recorded session still holds the lock
};

/// The state rule, once for every backend:
///  lease row: held if live; else free if never acquired or released (every acquisition
///    clears released_at, so a set one was written after it: no comparison of two clock
///    readings that a clock step could misorder); else expired (the holder vanished).
///  session-strategy row: held iff the server says its session still holds the lock, or,
///    released, while a --min-hold keeps it (live: its expires_at ahead); else free (a crashed
///    holder is free).
LockStatus::State state_of(const LockStatus& row, HolderVerdict verdict);

/// One strategy per key (dblock(1), --strategy; --table-format shedlock counts as the strategy
/// "shedlock"): SQL, over the <prefix>locks row `row` (an alias and its dot, or ""), that holds
/// when a take with strategy `mine` (SQL: a literal or a parameter) may take the row as far as
/// strategies go: it records `mine` or no strategy, or its holder is done: released, never
/// acquired, or a lease that is over (`lease_over`: the dialect's judgement of that row). A
/// take adds it to its own condition, so the row lock that serializes two takes also settles
/// which strategy holds the key. A semaphore's header has rules of its own.
std::string strategy_allows_sql(std::string_view row, std::string_view mine, std::string_view lease_over);

/// The same rule, on a row read after a take it refused (`lease_live`: the dialect's verdict):
/// true when the row records another strategy than `asked` whose holder may still hold the key,
/// a crashed session holder included (fail closed: only `release --force` clears its row).
bool other_strategy_holds(const LockStatus& row, bool lease_live, std::string_view asked);

/// Binds the holder's columns that every take writes (tables.hpp, Column::holder; sql::taken_row)
/// from `req`, each under its column's name; returns `params`.
sql::Params& bind_holder(sql::Params& params, const LockRequest& req);

/// The columns of status_select_list() as LockStatus, state not yet judged. A session
/// strategy's row shows no expires_at (it has no lease).
LockStatus decode_status(const ColumnReader& row);
/// decode_status() and state_of() together.
LockStatus read_status(const ColumnReader& row, HolderVerdict verdict);

/// status of the given keys: `found` (the rows read for them, any order) in the order asked,
/// a key asked twice coming twice; a key without a row is free at token 0, stamped with the
/// database clock of a row read, or of `now_ms()` when there was none. Empty `keys`: every
/// row, `found` as it is.
Result<std::vector<LockStatus>> in_request_order(std::vector<LockStatus> found, std::span<const std::string> keys,
                                                 const std::function<Result<std::int64_t>()>& now_ms);

/// The SELECT list (without SELECT) of the <prefix>runs columns history reads, every one (tables.hpp),
/// in the order decode_run() reads them.
std::string history_select_list(const EpochMs& epoch_ms);
/// One row of history_select_list(); an outcome this version does not know reads `failed`.
RunRecord decode_run(const ColumnReader& row);

/// The holder a stateless renew/release names, for its messages: "owner X", "token N",
/// "owner X with token N", or "anyone" (--force, or nothing named).
std::string describe(const HolderSelector& who);

}  // namespace dblock::rows

#pragma once
// The rules every dialect once wrote in its own SQL, spelled once here and rendered through the
// few expressions a dialect really spells its own way (Dialect): the history of runs (insert,
// oldest, trim), --min-interval's due check, the numbering of fencing tokens and when a
// semaphore's header may be taken. Each statement is still one round trip.

#include <string>
#include <string_view>

#include "core/sql/statements.hpp"

namespace dblock::sql {

/// What a dialect spells its own way, for the rules of this file; each dialect gives one, in its
/// <name>_statements.cpp.
struct Dialect {
  /// The current time, as the timestamp columns store it.
  std::string now;
  /// The stored timestamp of `ms`, an integer SQL expression of epoch milliseconds.
  std::string (*time_of_ms)(std::string_view ms) = nullptr;
  /// The bound parameter `param` (":name") where an integer is expected (PostgreSQL's arrive as
  /// text, so it casts).
  std::string (*integer)(std::string_view param) = nullptr;
  /// Whole milliseconds (an integer) from the last start of the row `row` ("" or an alias and its
  /// dot) to `now` (a time expression; SQLite judges on its own clock).
  std::string (*started_ms_ago)(std::string_view row, std::string_view now) = nullptr;
  /// 1 (true) while the lease of the row `row` ("" or an alias and its dot) runs, else 0 (false),
  /// never NULL.
  std::string (*lease_live)(std::string_view row) = nullptr;
  /// `a` and `b` equal, NULL equal to NULL, never NULL itself.
  std::string (*same)(std::string_view a, std::string_view b) = nullptr;
};

/// LeaseStatements::history over <prefix>runs, quoted as `runs`.
HistoryStatements history_statements(const Dialect& d, const std::string& runs);

/// --min-interval (dblock(1)), over :min_interval_ms: whether the row `row` may start at `now`
/// (none asked, never started, or its last start at least that long before `now`).
std::string due_sql(const Dialect& d, std::string_view row, std::string_view now);

/// The milliseconds until the row `row` may start (LeaseStatements::refusal's due_in_ms): NULL
/// when none is asked or it never started, <= 0 when it may now.
std::string due_in_ms_sql(const Dialect& d, std::string_view row);

/// Fencing tokens (dblock(1), FENCING TOKENS): the token of a row taken. `given`: the :token
/// parameter, when not NULL, is the token (a semaphore slot's, from its header); else one above
/// the row's last token and above `fence`, the failover fence as a SQL expression ("" where
/// there is none). first_token_sql: a new row's; next_token_sql: the row `row`'s ("" or an alias
/// and its dot).
std::string first_token_sql(const Dialect& d, bool given, std::string_view fence);
std::string next_token_sql(const Dialect& d, std::string_view row, bool given, std::string_view fence);

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
/// answers each, so failover.cpp judges nothing itself; a take that folds the gate in
/// (FailoverStatements::folded) asks failover_open_sql.
std::string failover_delayed_sql(const Dialect& d, std::string_view r);
std::string failover_covers_sql(const Dialect& d, std::string_view r);
std::string failover_open_sql(const Dialect& d, std::string_view r, std::string_view here);

}  // namespace dblock::sql

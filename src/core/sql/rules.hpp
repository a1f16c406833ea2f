#pragma once
// The rules every dialect once wrote in its own SQL, spelled once here and rendered through the
// few expressions a dialect really spells its own way (Dialect): the history of runs (insert,
// oldest, trim). Each rule is still one statement, one round trip.

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
};

/// LeaseStatements::history over <prefix>runs, quoted as `runs`.
HistoryStatements history_statements(const Dialect& d, const std::string& runs);

}  // namespace dblock::sql

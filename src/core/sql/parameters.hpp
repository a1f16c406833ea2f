#pragma once
// The named parameters core binds as integers, for a connection that declares its parameters'
// types when it sends or parses a statement (PostgreSQL's: int8), so no statement casts them
// in its text.

#include <algorithm>
#include <array>
#include <string_view>

namespace dblock::sql {

/// Whether core binds the parameter `name` (without its colon) as a 64-bit integer or NULL
/// wherever a statement reads it: a statement parsed ahead of its values (Session::prepare), and
/// a NULL, take the type from here, not from a value. Not the halves of a key's hash (:hi, :lo),
/// which the two-int functions that read them type themselves, nor flags compared with text.
/// (:lock is the key's hash where a dialect's lock takes a number; MySQL's names a lock, and its
/// connection declares no types.)
inline bool integer_parameter(std::string_view name) {
  static constexpr std::array<std::string_view, 22> names = {
      "exit_code", "fence", "finished", "force", "gate", "hand", "keep", "limit", "lock", "min_hold_ms",
      "min_interval_ms", "pid", "recount", "run_exit_code", "run_pid", "slack", "slots", "started_id",
      "started_ms", "token", "ttl_ms", "wait_ms"};
  return std::ranges::find(names, name) != names.end();
}

}  // namespace dblock::sql

#pragma once
// Durations as dblock(1) writes them: 250ms, 30s, 5m, 1h30m, 2d, or bare seconds (5, 0.5), and
// systemd.time(7) time spans (10min, 2sec, "1h 30min", 500us), rounded to the millisecond.

#include <string>
#include <string_view>

#include "core/error.hpp"
#include "core/lock_types.hpp"

namespace dblock {

/// Parses a duration; ErrorKind::usage naming the problem for anything else.
Result<Millis> parse_duration(std::string_view text);

/// Short human form: "250ms", "30s", "1h30m", "2d".
std::string format_duration(Millis d);

}  // namespace dblock

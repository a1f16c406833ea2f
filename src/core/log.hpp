#pragma once
// Messages to stderr, always prefixed "dblock: ". Errors always print; -v adds decisions;
// -q leaves nothing but errors. Errors are also sent to the --log sink (core/event_log.hpp).

#include <string_view>

namespace dblock::log {

enum class Level { quiet, normal, verbose };

void set_level(Level level);
Level level();

/// Whether stderr is a terminal a person watches (set by the CLI): progress lines need one.
void set_interactive(bool interactive);

/// Always printed, and sent to the --log sink as an "error" event.
void error(std::string_view message);
/// Always printed, not sent to the --log sink: for a caller that sends its own event.
void error_on_stderr(std::string_view message);
/// Printed unless -q.
void warn(std::string_view message);
/// Printed only with -v: one line per decision.
void verbose(std::string_view message);
/// Printed only on a terminal and not with -q: feedback for a person waiting (`run -w`).
void progress(std::string_view message);

}  // namespace dblock::log

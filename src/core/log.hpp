#pragma once
// Messages to stderr, always prefixed "dblock: ". Errors always print; -v adds decisions;
// -q leaves nothing but errors.

#include <string_view>

namespace dblock::log {

enum class Level { quiet, normal, verbose };

void set_level(Level level);
Level level();

/// Always printed.
void error(std::string_view message);
/// Printed unless -q.
void warn(std::string_view message);
/// Printed only with -v: one line per decision.
void verbose(std::string_view message);

}  // namespace dblock::log

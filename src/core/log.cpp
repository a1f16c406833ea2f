#include "core/log.hpp"

#include <unistd.h>

#include <string>

#include "core/event_log.hpp"
#include "core/text.hpp"

namespace dblock::log {
namespace {

Level current = Level::normal;
bool interactive = false;

// One write(2) per line, so lines from concurrent processes sharing stderr do not interleave.
// Messages quote what the lock table holds (an owner, a host), which anyone who can write the
// table chose: its control characters are escaped before they reach a terminal.
void emit(std::string_view prefix, std::string_view message) {
  std::string line = "dblock: ";
  line += prefix;
  line += escape_controls(message);
  line += '\n';
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) return;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace

void set_level(Level level) { current = level; }
Level level() { return current; }

void set_interactive(bool value) { interactive = value; }

void error(std::string_view message) {
  emit("", message);
  event_log::error(message);
}

void error_on_stderr(std::string_view message) { emit("", message); }

void progress(std::string_view message) {
  if (interactive && current != Level::quiet) emit("", message);
}

void warn(std::string_view message) {
  if (current != Level::quiet) emit("warning: ", message);
}

void verbose(std::string_view message) {
  if (current == Level::verbose) emit("", message);
}

}  // namespace dblock::log

#pragma once
// Wire formats and delivery of the --log sinks (core/event_log.hpp): an RFC 3164 line for
// /dev/log and an entry of the journal's native protocol (https://systemd.io/JOURNAL_NATIVE_PROTOCOL/).
// Written here rather than with syslog(3) or sd_journal_send(3) because neither can be pointed
// at another socket, which is how the tests receive what dblock sends.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace dblock::log_sinks {

/// "<PRI>Mmm dd hh:mm:ss IDENT[PID]: MESSAGE" (facility user), local time as syslog(3) writes it;
/// line breaks in the message become spaces.
std::string syslog_line(int severity, std::string_view ident, long pid, std::string_view message, std::int64_t epoch_s);

/// Journal entry: "NAME=value\n" per field, or for a value with a line break the binary form
/// NAME "\n" little-endian 64-bit length, value, "\n".
std::string journal_entry(const std::vector<std::pair<std::string, std::string>>& fields);

/// Sends one datagram to the AF_UNIX/SOCK_DGRAM socket at `path`. A payload too large for a
/// datagram goes as a sealed memfd with an empty payload when `memfd_fallback` (the journal
/// accepts that; syslog does not, so its lines are cut short instead by the caller).
Result<void> send_datagram(const std::string& path, std::string_view payload, bool memfd_fallback);

}  // namespace dblock::log_sinks

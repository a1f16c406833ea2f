#pragma once
// The decisions an operator has to find later (a skip, a wait, a loss, --max-hold, a SIGKILL,
// a failed release, an error; with --log-runs also the start and end of every run), as
// structured events. Core decides and emits; the CLI picks where they go (--log):
//   stderr   nothing more than today's stderr messages (the default)
//   syslog   one RFC 3164 datagram per event to /dev/log
//   journal  one entry per event in the journal's native protocol, with the fields
//            DBLOCK_KEY, DBLOCK_TOKEN, DBLOCK_HOLDER, DBLOCK_OUTCOME, DBLOCK_EXIT
// Events are sent whatever -q and -E say: those are about the terminal and the exit status.
// man/dblock.1 LOGGING lists every event and its line.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace dblock::event_log {

enum class Sink { stderr_only, syslog, journal };

/// "stderr", "syslog" or "journal"; anything else is ErrorKind::usage.
Result<Sink> parse_sink(std::string_view text);

/// syslog(3) severities, the journal's PRIORITY.
enum class Priority { err = 3, warning = 4, notice = 5, info = 6 };

// DBLOCK_OUTCOME of an event: skipped, acquired, started, lost, max-hold, killed,
// release-failed, error, or at the end of a run (--log-runs) the run's outcome (ok, failed,
// lost, killed, max-hold, signal).

/// Chosen by the CLI once, after parsing. Sockets come from DBLOCK_SYSLOG_SOCKET /
/// DBLOCK_JOURNAL_SOCKET when set (for tests), else /dev/log / /run/systemd/journal/socket.
void configure(Sink sink, bool log_runs);
/// --log-runs: also an event at the start and at the end of every run.
bool log_runs();

/// The key (DBLOCK_KEY) and fencing token of the run in progress, for every later event.
void set_key(std::string_view key);
void set_token(std::int64_t token);

/// Sends one event: MESSAGE is `line`; `exit_code` (DBLOCK_EXIT) is the status dblock is about
/// to return, `holder` (DBLOCK_HOLDER) who else holds the lock. The stderr sink sends nothing
/// (the caller prints its own stderr line, as before). A sink that cannot be reached is
/// reported once on stderr.
void emit(std::string_view outcome, std::string_view line, Priority priority = Priority::info,
          std::optional<int> exit_code = std::nullopt, std::string_view holder = {});

/// An error already printed on stderr (log::error): sent as an "error" event.
void error(std::string_view message);

}  // namespace dblock::event_log

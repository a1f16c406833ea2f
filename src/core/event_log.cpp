#include "core/event_log.hpp"

#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "core/log.hpp"
#include "core/log_sinks.hpp"
#include "core/text.hpp"

namespace dblock::event_log {
namespace {

struct State {
  Sink sink = Sink::stderr_only;
  bool log_runs = false;
  std::string key;
  std::optional<std::int64_t> token;
  bool reported_failure = false;
  bool sending = false;  // an error while sending must not send again
};

State& state() {
  static State s;
  return s;
}

// A syslog line longer than this is cut: receivers drop or split datagrams past a few KiB
// (rsyslog's default maximum message size is 8 KiB).
constexpr std::size_t max_syslog_line = 4000;

std::string socket_path(const char* env, const char* fallback) {
  const char* value = std::getenv(env);
  return value && *value ? value : fallback;
}

std::int64_t epoch_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec;
}

struct Event {
  std::string_view outcome;
  std::string_view message;
  Priority priority;
  std::optional<int> exit_code;
  std::string_view holder;
};

// The message and the holder may quote the lock table, which anyone who can write it chose:
// control characters are escaped as on stderr, so a log viewer shows what a terminal would.
Result<void> send(const Event& e) {
  const State& s = state();
  const std::string message = escape_controls(e.message);
  if (s.sink == Sink::syslog) {
    std::string line = log_sinks::syslog_line(static_cast<int>(e.priority), "dblock", static_cast<long>(::getpid()),
                                              message, epoch_seconds());
    if (line.size() > max_syslog_line) line.resize(max_syslog_line);
    return log_sinks::send_datagram(socket_path("DBLOCK_SYSLOG_SOCKET", "/dev/log"), line, false);
  }
  std::vector<std::pair<std::string, std::string>> fields{
      {"MESSAGE", message},
      {"PRIORITY", std::to_string(static_cast<int>(e.priority))},
      {"SYSLOG_IDENTIFIER", "dblock"},
      {"DBLOCK_OUTCOME", std::string(e.outcome)},
  };
  if (!s.key.empty()) fields.emplace_back("DBLOCK_KEY", s.key);
  if (s.token) fields.emplace_back("DBLOCK_TOKEN", std::to_string(*s.token));
  if (!e.holder.empty()) fields.emplace_back("DBLOCK_HOLDER", escape_controls(e.holder));
  if (e.exit_code) fields.emplace_back("DBLOCK_EXIT", std::to_string(*e.exit_code));
  return log_sinks::send_datagram(socket_path("DBLOCK_JOURNAL_SOCKET", "/run/systemd/journal/socket"),
                                  log_sinks::journal_entry(fields), true);
}

}  // namespace

Result<Sink> parse_sink(std::string_view text) {
  if (text == "stderr") return Sink::stderr_only;
  if (text == "syslog") return Sink::syslog;
  if (text == "journal") return Sink::journal;
  return fail(ErrorKind::usage, "--log " + std::string(text) + ": use stderr, syslog or journal");
}

void configure(Sink sink, bool log_runs) {
  state().sink = sink;
  state().log_runs = log_runs;
}

bool log_runs() { return state().log_runs; }

void set_key(std::string_view key) { state().key = key; }
void set_token(std::int64_t token) { state().token = token; }

void emit(std::string_view outcome, std::string_view line, Priority priority, std::optional<int> exit_code,
          std::string_view holder) {
  State& s = state();
  if (s.sink == Sink::stderr_only || s.sending) return;
  s.sending = true;
  auto sent = send(Event{outcome, line, priority, exit_code, holder});
  s.sending = false;
  // Once per process: a missing /dev/log must not drown the job's own messages.
  if (!sent && !s.reported_failure) {
    s.reported_failure = true;
    log::error_on_stderr("cannot write to --log " + std::string(s.sink == Sink::syslog ? "syslog" : "journal") +
                         ": " + sent.error().message);
  }
}

void error(std::string_view message) {
  emit("error", message, Priority::err);
}

}  // namespace dblock::event_log

#include "core/run_job.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>
#include <system_error>

#include "core/acquire_loop.hpp"
#include "core/child_process.hpp"
#include "core/clock.hpp"
#include "core/duration.hpp"
#include "core/event_log.hpp"
#include "core/exit_code.hpp"
#include "core/heartbeat.hpp"
#include "core/key.hpp"
#include "core/log.hpp"
#include "core/signals.hpp"

namespace dblock {
namespace {

using namespace std::chrono_literals;

int report(const Error& error, std::string_view key = {}) {
  const int status = exit_code_for(error.kind);
  const std::string line = error_line(key, error);
  log::error_on_stderr(line);
  event_log::emit("error", line, event_log::Priority::err, status);
  return status;
}

// The --log event of a decision that also prints this line on stderr as an error.
void error_event(const std::string& outcome, const std::string& line, std::optional<int> exit_code) {
  log::error_on_stderr(line);
  event_log::emit(outcome, line, event_log::Priority::err, exit_code);
}

// Why a run did not start: the holder, or the --min-interval not yet passed. A person at the
// terminal gets the reason too, unless the wait already told them; cron gets no mail.
void skipped_event(const std::string& key, const WaitResult& waited, int exit_code) {
  const AcquireOutcome& out = waited.outcome;
  std::string why;
  std::string why_for_a_person;
  std::string holder;
  if (out.state == AcquireOutcome::State::not_due) {
    why = describe_not_due(out);
    why_for_a_person = why;
  } else if (!waited.turned_away.empty()) {
    why = why_for_a_person = waited.turned_away;
  } else if (out.lock_delay) {
    why = why_for_a_person = describe_lock_delay(*out.lock_delay);
  } else if (out.holder) {
    why = describe_holder(*out.holder);
    why_for_a_person = "held by " + holder_summary(*out.holder);
    holder = out.holder->owner;
  } else {
    why = why_for_a_person = "held by someone else";
  }
  if (!waited.told_waiting) log::progress("skipped '" + key + "': " + why_for_a_person);
  std::string line = "skipped '" + key + "': " + why;
  if (waited.attempts > 1) line += " (waited " + format_duration(waited.waited) + ")";
  event_log::emit("skipped", line, event_log::Priority::notice, exit_code, holder);
}

// Why dblock itself stopped the command (first reason wins).
enum class StopReason { none, lost, max_hold };

struct Finished {
  RunOutcome outcome = RunOutcome::ok;
  int command_status = 0;  // the command's own status (128+N for a signal), for history
  int exit_status = 0;     // what dblock exits with
};

// Runs the command under the heartbeat until it has ended; decides the outcome.
class Supervisor {
 public:
  /// session_fd: a duplicate of the lock session's socket (-1 for lease), watched for the
  /// server closing the session.
  Supervisor(const RunOptions& o, Locker& locker, Heartbeat& heartbeat, SignalWatch& signals, const WaitResult& acquired,
             int session_fd)
      : o_(o), locker_(locker), heartbeat_(heartbeat), signals_(signals), acquired_(acquired),
        started_(acquired.replied_at), session_fd_(session_fd) {}
  /// The heartbeat outlives the locker (it is made before the lock is asked for): however the
  /// run ends, its thread has let go of the locker before the locker goes.
  ~Supervisor() { heartbeat_.stop(); }
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  Finished run(Child& child);
  /// Session strategies: the server lock is what excludes, so --min-hold is waited out here.
  void stop_heartbeat() { heartbeat_.stop(); }
  /// Once the release is done: the stopped heartbeat's thread may end now (heartbeat.hpp).
  void let_heartbeat_go() { heartbeat_.let_go(); }

 private:
  void terminate(Child& child, StopReason why, Millis now);
  Millis term_deadline(const Heartbeat::State& st) const {
    return st.deadline - o_.kill_after - HeartbeatTiming::safety_margin();
  }
  /// Lease: the local deadline (the lease may expire unrenewed). Session strategies: only
  /// proof that the session lost the lock counts; a process paused past its deadline whose
  /// session still holds the lock is not lost (the heartbeat renews first after waking).
  bool deadline_rule() const { return !is_session_strategy(o_.strategy); }

  const RunOptions& o_;
  Locker& locker_;
  Heartbeat& heartbeat_;
  SignalWatch& signals_;
  const WaitResult& acquired_;
  const Millis started_;
  StopReason stop_ = StopReason::none;
  Millis term_sent_at_{0};
  bool kill_sent_ = false;
  bool lost_ignored_ = false;
  int got_signal_ = 0;
  Millis signal_at_{0};  // when the first signal that tells a job to stop was passed on (0: none)
  int session_fd_ = -1;
  bool session_closed_ = false;
};

// What the rest of a job told to stop by a signal passed on gets at least before SIGKILL: a
// short --kill-after (a short --ttl's default is 0) is for dblock's own SIGTERM, which the
// command must obey in time; a signal passed on is the job's to handle, in its handlers.
constexpr Millis job_grace{1000};

void Supervisor::terminate(Child& child, StopReason why, Millis now) {
  stop_ = why;
  term_sent_at_ = now;
  child.signal_group(SIGTERM);
  if (o_.kill_after <= 0ms) {
    child.signal_group(SIGKILL);
    kill_sent_ = true;
  }
}

Finished Supervisor::run(Child& child) {
  heartbeat_.start(locker_, o_.request.ttl, acquired_.sent_at);
  const std::string& key = o_.request.key;

  while (!child.poll_exit()) {
    const Millis now = boottime_now();
    const Heartbeat::State st = heartbeat_.state();
    const bool stopping = stop_ != StopReason::none;

    const bool past_deadline = deadline_rule() && now >= term_deadline(st);
    if (!stopping && !lost_ignored_ && (st.lost || session_closed_ || past_deadline)) {
      std::string why = session_closed_ ? "the server closed the session holding the lock on '" + key + "'"
                        : st.lost       ? "the lock on '" + key + "' was lost (" + st.last_error + ")"
                                        : "could not renew the lock on '" + key + "' in time" +
                                        (st.last_error.empty() ? std::string() : " (" + st.last_error + ")");
      if (o_.terminate_on_lost) {
        error_event("lost", why + "; terminating the command", exit_lost);
        terminate(child, StopReason::lost, now);
      } else {
        const std::string line = why + "; --on-lost ignore: letting the command finish";
        log::warn(line);
        event_log::emit("lost", line, event_log::Priority::warning);
        lost_ignored_ = true;
      }
    } else if (!stopping && o_.max_hold && now >= started_ + *o_.max_hold) {
      error_event("max-hold",
                  "--max-hold " + format_duration(*o_.max_hold) + " expired for '" + key + "'; terminating the command",
                  exit_max_hold);
      terminate(child, StopReason::max_hold, now);
    }
    if (stop_ != StopReason::none && !kill_sent_ && now >= term_sent_at_ + o_.kill_after) {
      const std::string line = "the command of '" + key + "' outlived --kill-after " + format_duration(o_.kill_after) +
                               " after SIGTERM: SIGKILL";
      log::verbose(line);
      event_log::emit("killed", line, event_log::Priority::warning);
      child.signal_group(SIGKILL);
      kill_sent_ = true;
    }

    // Sleep until the next thing that could need doing; SIGCHLD and the heartbeat wake us.
    Millis wake = now + 1000ms;
    if (stop_ == StopReason::none) {
      if (!lost_ignored_ && deadline_rule()) wake = std::min(wake, term_deadline(st));
      if (o_.max_hold) wake = std::min(wake, started_ + *o_.max_hold);
    } else if (!kill_sent_) {
      wake = std::min(wake, term_sent_at_ + o_.kill_after);
    }
    const Millis after = boottime_now();
    const int timeout = static_cast<int>(std::max<std::int64_t>((wake - after).count(), 0));
    // POLLRDHUP: the server closed the session (KILL, pg_terminate_backend, a restart);
    // unlike POLLIN it does not fire for data the server may send unasked.
    const int watch_session = session_fd_ >= 0 && !session_closed_ && !lost_ignored_ ? session_fd_ : -1;
    pollfd fds[4] = {{signals_.fd(), POLLIN, 0},
                     {heartbeat_.fd(), POLLIN, 0},
                     {child.exit_fd(), POLLIN, 0},
                     {watch_session, POLLRDHUP, 0}};
    if (::poll(fds, 4, timeout) > 0) {
      if (fds[1].revents & POLLIN) heartbeat_.drain();
      if (fds[3].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
        session_closed_ = true;
        if (o_.terminate_on_lost) continue;  // acted on at the top of the loop, at once
      }
      while (auto sig = signals_.next()) {
        if (!is_forwarded_signal(*sig)) continue;  // SIGCHLD: poll_exit() looks
        log::verbose("got signal " + std::to_string(*sig) + ": passing it to the command");
        got_signal_ = *sig;
        // SIGUSR1 and SIGUSR2 ask a job for something (reopen a log, say), not to stop.
        if (*sig != SIGUSR1 && *sig != SIGUSR2 && signal_at_.count() == 0) signal_at_ = boottime_now();
        child.signal_group(*sig);
      }
    }
  }

  // A job told to stop (a signal passed on, or dblock's own SIGTERM) may outlive its command:
  // a child still in its signal handler, a grandchild the command left behind. The lock waits
  // for the rest of it, SIGKILL after --kill-after (after a signal passed on, which the command
  // itself may take as long as it likes to obey, at least job_grace), so that the next holder
  // never starts beside a part of this one. A command that ended by itself is taken at its
  // word (man page, "The command's process tree").
  if (signal_at_.count() > 0 || stop_ != StopReason::none) {
    const Millis kill_at = stop_ != StopReason::none ? (kill_sent_ ? Millis(0) : term_sent_at_ + o_.kill_after)
                                                     : signal_at_ + std::max(o_.kill_after, job_grace);
    if (!child.wait_for_job(kill_at, std::max(kill_at, boottime_now()) + Child::kill_give_up))
      log::warn("part of the job of '" + key + "' was still running " + format_duration(Child::kill_give_up) +
                " after SIGKILL; releasing the lock");
  }

  Finished f;
  f.command_status = child.exit_status();
  f.exit_status = f.command_status;
  if (stop_ == StopReason::lost) {
    f.outcome = RunOutcome::lost;
    f.exit_status = exit_lost;
  } else if (lost_ignored_) {
    f.outcome = RunOutcome::lost;
  } else if (stop_ == StopReason::max_hold) {
    f.outcome = RunOutcome::max_hold;
    f.exit_status = exit_max_hold;
  } else if (got_signal_ && f.command_status != 0) {
    f.outcome = RunOutcome::killed;
  } else if (child.term_signal()) {
    f.outcome = RunOutcome::signal;
  } else {
    f.outcome = f.command_status == 0 ? RunOutcome::ok : RunOutcome::failed;
  }
  return f;
}

std::string join_command(const std::vector<std::string>& argv) {
  // -c arrives as {"/bin/sh", "-c", text}: name the shell, which is what failed to execute.
  return argv.empty() ? std::string() : argv.front();
}

// No process could be made for the command (a process limit, memory): it never ran and is not
// unexecutable, so neither 126 nor a history row; the fix is the limit, which the line names.
// what: the process or thread that could not be made ("fork", "the heartbeat's thread").
int report_cannot_start(const RunOptions& o, std::string_view what, int err) {
  std::string line = "cannot start " + join_command(o.command) + ": " + std::string(what) + ": " + std::strerror(err);
  if (err == EAGAIN) line += " (a process limit is reached: ulimit -u, systemd's TasksMax=, a cgroup's pids.max)";
  error_event("error", line, exit_no_process);
  return exit_no_process;
}

}  // namespace

Result<void> validate_run_timing(Millis ttl, Millis kill_after) {
  const Millis margin = HeartbeatTiming::safety_margin();
  // The first renew goes out at ttl/3; if it fails, the retries up to the second interval
  // must still end before SIGTERM, which leaves kill_after + margin before the deadline.
  // So ttl/3 >= kill_after + margin, i.e. ttl >= 3 * (kill_after + margin).
  if (kill_after < 0ms) return fail(ErrorKind::usage, "--kill-after must not be negative");
  if (ttl / 3 >= kill_after + margin) return {};
  // Suggest round numbers: the ttl rounded up, the grace rounded down, to whole seconds.
  const Millis min_ttl = std::chrono::ceil<std::chrono::seconds>(3 * (kill_after + margin));
  const Millis max_kill_after = std::chrono::floor<std::chrono::seconds>(ttl / 3 - margin);
  std::string message = "--ttl " + format_duration(ttl) + " is too short for --kill-after " +
                        format_duration(kill_after) +
                        ": the lease must cover a renew interval (ttl/3) of retries, the grace and a " +
                        format_duration(margin) + " margin; use --ttl " + format_duration(min_ttl) + " or more";
  if (max_kill_after >= 0ms) message += ", or --kill-after " + format_duration(max_kill_after) + " or less";
  return fail(ErrorKind::usage, message);
}

Result<void> validate_ttl(Millis ttl) {
  const Millis margin = HeartbeatTiming::safety_margin();
  if (ttl / 3 >= margin) return {};
  return fail(ErrorKind::usage, "--ttl " + format_duration(ttl) + " is too short: use --ttl " +
                                    format_duration(3 * margin) + " or more (a renew interval, ttl/3, must cover a " +
                                    format_duration(margin) + " margin)");
}

Millis default_kill_after(Millis ttl) {
  const Millis fits = std::chrono::floor<std::chrono::seconds>(ttl / 3 - HeartbeatTiming::safety_margin());
  return std::clamp(fits, Millis(0), Millis(5000));
}

int run_job(const OpenLocker& open, const RunOptions& options) {
  return run_job([&open] { return open; }, options);
}

int run_job(const std::function<OpenLocker()>& make_open, const RunOptions& o) {
  event_log::set_key(o.request.key);
  if (auto timing = validate_run_timing(o.request.ttl, o.kill_after); !timing) return report(timing.error());
  if (o.command.empty()) return report(Error{ErrorKind::usage, "run: no command given"});

  // Blocked from here to the end, so no signal between acquire and start can kill dblock
  // with the lock still held.
  SignalWatch signals;

  ChildSpec spec;
  spec.argv = o.command;
  // Only names dblock never reads as a setting describe the run: a dblock inside the command
  // must not take this run's strategy for its own --strategy (DBLOCK_STRATEGY).
  spec.set_env = {{"DBLOCK_KEY", o.request.key},
                  {"DBLOCK_OWNER", o.request.owner},
                  {"DBLOCK_RUN_STRATEGY", std::string(to_string(o.strategy))}};
  spec.set_env.insert(spec.set_env.end(), o.database_env.begin(), o.database_env.end());
  spec.late_env = {"DBLOCK_TOKEN"};
  spec.unset_env = {"DBLOCK_DSN", "DBLOCK_DSN_FILE"};
  // A semaphore's slot is known only once taken; a plain run's command never sees the slot
  // of a dblock it runs under.
  if (o.request.slots > 0) spec.late_env.push_back("DBLOCK_SLOT");
  else spec.unset_env.push_back("DBLOCK_SLOT");
  // The guard is forked now, while dblock is small and single-threaded, so the handoff from
  // the previous holder costs only the command's own fork and exec (child_process.hpp).
  auto prepared = Child::prepare(spec);
  if (!prepared) return report(prepared.error(), o.request.key);
  Child child = std::move(*prepared);
  if (child.fork_errno()) return report_cannot_start(o, "fork", child.fork_errno());  // before the lock is asked for
  std::optional<Heartbeat> heartbeat;
  try {
    heartbeat.emplace();
  } catch (const std::system_error& e) {
    return report_cannot_start(o, "the heartbeat's thread", e.code().value());  // before the lock too
  }

  const OpenLocker open = make_open();
  auto opened = acquire_with_wait(open, o.request, o.wait, signals, overload_retry_for(o.overload_retry, o.request.ttl));
  if (!opened) return report(opened.error(), o.request.key);
  const WaitResult& waited = opened->result;
  if (waited.signal) return exit_signal_base + waited.signal;
  if (waited.outcome.state != AcquireOutcome::State::acquired) {
    // The locker goes first, and a connection of its own with it (a session strategy's): in a
    // start storm against max_connections its slot is the next contender's, not held while the
    // skip is described (the holder's times formatted, the time zone read) and reported.
    opened->locker.reset();
    skipped_event(o.request.key, waited, o.conflict_exit_code);
    return o.conflict_exit_code;
  }
  Locker& locker = *opened->locker;
  const AcquireOutcome& got = waited.outcome;
  event_log::set_token(got.token);
  if (waited.attempts > 1) {
    std::string line = "acquired '" + o.request.key + "' with token " + std::to_string(got.token) + " after waiting " +
                       format_duration(waited.waited);
    if (waited.last_holder) line += " for " + waited.last_holder->owner;
    event_log::emit("acquired", line, event_log::Priority::info, std::nullopt,
                    waited.last_holder ? waited.last_holder->owner : std::string());
  }
  // The guard holds this duplicate of the session socket until the whole job is dead, so the
  // server cannot free the lock while any process of the job still runs, even when dblock
  // itself is killed with SIGKILL. The supervisor watches it for the server closing the session.
  UniqueFd session_fd(locker.session_fd() >= 0 ? ::fcntl(locker.session_fd(), F_DUPFD_CLOEXEC, 3) : -1);

  Supervisor supervisor(o, locker, *heartbeat, signals, waited, session_fd.get());
  Finished finished;
  int error_status = 0;
  std::vector<std::string> late_values{std::to_string(got.token)};
  if (o.request.slots > 0) late_values.push_back(std::to_string(got.slot.value_or(0)));
  auto started = child.start(late_values, session_fd.get());
  // A run is logged as history counts it: from the moment its process exists. A command no
  // process could be made for (71) logs its error alone, neither a start nor an end.
  const bool ran = child.fork_errno() == 0;
  if (ran && event_log::log_runs())
    event_log::emit("started", "started '" + o.request.key + "' with token " + std::to_string(got.token) + ": " +
                                   join_command(o.command));
  if (!started) {
    error_status = report(started.error(), o.request.key);
    finished = {RunOutcome::failed, error_status, error_status};
  } else if (child.fork_errno()) {
    const int status = report_cannot_start(o, "fork", child.fork_errno());
    finished = {RunOutcome::failed, status, status};
  } else if (child.exec_errno()) {
    const int status = child.exec_failure_status();
    error_event("error", "cannot execute " + join_command(o.command) + ": " + std::strerror(child.exec_errno()),
                status);
    finished = {RunOutcome::failed, status, status};
  } else {
    finished = supervisor.run(child);
  }
  supervisor.stop_heartbeat();

  // A command that never started leaves no trace of a run: the lock is given back at once (no
  // --min-hold), with no history row and the last run's status left as it was.
  ReleaseRequest release;
  release.min_hold = ran ? o.min_hold : 0ms;
  release.finished_run = ran;
  if (ran) release.exit_code = finished.command_status;
  if (o.record_history && ran) {
    RunRecord record;
    record.key = o.request.key;
    record.token = got.token;
    record.owner = o.request.owner;
    record.host = o.request.host;
    record.pid = o.request.pid;
    record.strategy = std::string(to_string(o.strategy));
    record.started_at_ms = got.acquired_at_ms.value_or(0);
    record.outcome = finished.outcome;
    record.exit_code = finished.command_status;
    release.history = std::move(record);
  }
  int exit_status = finished.exit_status;
  std::string_view outcome = to_string(finished.outcome);
  auto released = locker.release(release);
  // Both wait until now so that neither takes the CPU from the release (child_process.hpp,
  // heartbeat.hpp); they end alongside dblock's own end.
  child.let_guard_go();
  supervisor.let_heartbeat_go();
  if (!released) {
    // After a loss there is nothing left to release; the call only records the run if it can.
    if (finished.outcome == RunOutcome::lost) {
      log::verbose("release after losing the lock: " + released.error().message);
    } else if (released.error().kind == ErrorKind::lost) {
      // Taken over while the command ran (the history row says lost): the run was not
      // exclusive to the end, which a script must be able to tell from a clean run.
      if (o.terminate_on_lost) exit_status = exit_lost;
      outcome = to_string(RunOutcome::lost);
      error_event("lost", "the lock on '" + o.request.key + "' was lost while the command ran: " + released.error().message,
                  exit_status);
    } else {
      error_event("release-failed", "could not release '" + o.request.key + "': " + released.error().message,
                  exit_status);
    }
  } else {
    log::verbose("released '" + o.request.key + "' (" + std::string(to_string(finished.outcome)) + ", status " +
                 std::to_string(finished.command_status) + ")");
  }
  if (ran && event_log::log_runs())
    event_log::emit(outcome,
                    "finished '" + o.request.key + "' (" + std::string(outcome) + ", status " +
                        std::to_string(finished.command_status) + ") with exit status " + std::to_string(exit_status),
                    exit_status == 0 ? event_log::Priority::info : event_log::Priority::warning, exit_status);
  return exit_status;
}

}  // namespace dblock

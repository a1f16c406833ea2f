#pragma once
// Signals dblock reacts to are blocked and read through a signalfd, so the acquire loop and
// the supervision loop can poll them together with sockets and timers instead of racing an
// asynchronous handler.

#include <signal.h>

#include <optional>

namespace dblock {

/// Blocks SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGCHLD for its lifetime
/// and exposes them as a pollable descriptor; the previous mask comes back on destruction.
/// A signal the caller ignored (`nohup` ignores SIGHUP) is left out: it stays ignored, so it
/// neither ends a wait nor is forwarded, as with flock(1).
/// Create it on the main thread before any other thread starts, so every thread inherits
/// the mask and no signal is delivered to a default handler behind our back.
class SignalWatch {
 public:
  SignalWatch();
  ~SignalWatch();
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  /// Readable when one of the watched signals is pending; -1 if signalfd failed.
  int fd() const { return fd_; }
  /// The next pending signal, or nullopt when none is pending (never blocks).
  std::optional<int> next();

 private:
  int fd_ = -1;
  bool restore_ = false;
  sigset_t old_mask_{};
};

/// True for the signals dblock forwards to the command and that abort a wait (not SIGCHLD).
bool is_forwarded_signal(int sig);

/// True if dblock's caller started it with sig ignored (read once, as the program loads,
/// before dblock or a client library changes any disposition).
bool caller_ignored(int sig);

/// In a freshly forked child before exec: the caller's dispositions for the watched signals
/// and SIGTTOU/SIGTTIN/SIGPIPE (ignored stays ignored, as exec(3) keeps it; the rest default;
/// SIGCHLD always default), and an empty signal mask. Async-signal-safe.
void reset_signals_for_exec();

}  // namespace dblock

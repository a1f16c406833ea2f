#include "core/signals.hpp"

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>

namespace dblock {
namespace {

constexpr int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
// The signals whose disposition the command gets from dblock's caller.
constexpr int passed_on[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGTTOU, SIGTTIN, SIGPIPE};

// Read during static initialization: dblock changes SIGPIPE in the guard and may load a
// client library that ignores it, so only a reading taken before main is the caller's.
sigset_t read_caller_ignored() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : passed_on) {
    struct sigaction old{};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) sigaddset(&set, sig);
  }
  return set;
}
const sigset_t caller_ignored_set = read_caller_ignored();

sigset_t watched_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : forwarded)
    if (!caller_ignored(sig)) sigaddset(&set, sig);
  sigaddset(&set, SIGCHLD);
  return set;
}

}  // namespace

SignalWatch::SignalWatch() {
  sigset_t set = watched_set();
  restore_ = pthread_sigmask(SIG_BLOCK, &set, &old_mask_) == 0;
  fd_ = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

SignalWatch::~SignalWatch() {
  // A signal that arrived after the loops finished (say, during the release) was for a job
  // that is over; drain it so unblocking cannot kill us with its default action.
  while (next()) {
  }
  if (fd_ >= 0) ::close(fd_);
  if (restore_) pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

std::optional<int> SignalWatch::next() {
  if (fd_ < 0) return std::nullopt;
  signalfd_siginfo info{};
  for (;;) {
    ssize_t n = ::read(fd_, &info, sizeof info);
    if (n == static_cast<ssize_t>(sizeof info)) return static_cast<int>(info.ssi_signo);
    if (n < 0 && errno == EINTR) continue;
    return std::nullopt;
  }
}

bool caller_ignored(int sig) { return sigismember(&caller_ignored_set, sig) == 1; }

bool is_forwarded_signal(int sig) {
  for (int s : forwarded)
    if (s == sig) return true;
  return false;
}

void reset_signals_for_exec() {
  struct sigaction dfl{}, ign{};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  for (int sig : passed_on) sigaction(sig, caller_ignored(sig) ? &ign : &dfl, nullptr);
  sigaction(SIGCHLD, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

}  // namespace dblock

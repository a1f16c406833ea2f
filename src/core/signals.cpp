#include "core/signals.hpp"

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>

namespace dblock {
namespace {

constexpr int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

sigset_t watched_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : forwarded) sigaddset(&set, sig);
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

bool is_forwarded_signal(int sig) {
  for (int s : forwarded)
    if (s == sig) return true;
  return false;
}

void reset_signals_for_exec() {
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig : forwarded) sigaction(sig, &dfl, nullptr);
  for (int sig : {SIGCHLD, SIGTTOU, SIGTTIN, SIGPIPE}) sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

}  // namespace dblock

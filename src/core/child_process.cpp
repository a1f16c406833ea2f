#include "core/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/exit_code.hpp"
#include "core/signals.hpp"

extern char** environ;

namespace dblock {
namespace {

// Only after it is certain that the stdin terminal is ours to give: a dblock started in the
// background must not steal the terminal from the shell's foreground job.
bool terminal_is_ours() {
  if (!::isatty(STDIN_FILENO)) return false;
  return ::tcgetpgrp(STDIN_FILENO) == ::getpgrp();
}

// tcsetpgrp from a background group raises SIGTTOU; ignore it around the call.
void give_terminal(pid_t pgrp) {
  struct sigaction ign{}, old{};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  sigaction(SIGTTOU, &ign, &old);
  ::tcsetpgrp(STDIN_FILENO, pgrp);
  sigaction(SIGTTOU, &old, nullptr);
}

std::vector<std::string> build_environment(const ChildSpec& spec) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    std::string_view name = entry.substr(0, entry.find('='));
    bool drop = false;
    for (const auto& u : spec.unset_env) drop = drop || name == u;
    for (const auto& [k, v] : spec.set_env) drop = drop || name == k;
    if (!drop) env.emplace_back(entry);
  }
  for (const auto& [k, v] : spec.set_env) env.push_back(k + "=" + v);
  return env;
}

void write_all(int fd, const void* data, std::size_t len) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    len -= static_cast<std::size_t>(n);
  }
}

}  // namespace

Result<Child> Child::start(const ChildSpec& spec) {
  if (spec.argv.empty()) return fail(ErrorKind::usage, "no command given");

  // Everything the child needs is prepared before fork: after fork only async-signal-safe calls.
  std::vector<std::string> env_strings = build_environment(spec);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings = spec.argv;
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  // Close-on-exec: EOF on the parent's side means exec succeeded; 4 bytes are its errno.
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0)
    return fail(ErrorKind::internal, std::string("pipe: ") + std::strerror(errno));

  const bool interactive = terminal_is_ours();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(report[0]);
    ::close(report[1]);
    return fail(ErrorKind::internal, std::string("fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    ::close(report[0]);
    ::setpgid(0, 0);
    // A dblock killed with SIGKILL cannot stop its command; the kernel does it for us. The
    // parent may have died before prctl took effect, hence the getppid() re-check.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(exit_signal_base + SIGKILL);
    if (interactive) give_terminal(::getpid());
    reset_signals_for_exec();
    environ = envp.data();
    ::execvp(argv[0], argv.data());
    int err = errno;
    write_all(report[1], &err, sizeof err);
    ::_exit(err == ENOENT ? exit_not_found : exit_cannot_execute);
  }

  ::close(report[1]);
  // Both sides set the group, so whichever runs first, it exists before anyone signals it.
  ::setpgid(pid, pid);
  Child child;
  child.pid_ = pid;
  if (interactive) {
    give_terminal(pid);
    child.owns_terminal_ = true;
  }
  int err = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &err, sizeof err);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof err)) {
    child.exec_errno_ = err;
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    child.done_ = true;
    child.status_ = child.exec_failure_status();
    child.reclaim_terminal();
  }
  return child;
}

int Child::exec_failure_status() const {
  return exec_errno_ == ENOENT ? exit_not_found : exit_cannot_execute;
}

void Child::signal_group(int sig) const {
  if (pid_ > 0 && !done_) ::kill(-pid_, sig);
}

bool Child::poll_exit() {
  if (done_) return true;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r != pid_) return false;
  done_ = true;
  if (WIFEXITED(status)) {
    status_ = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    term_signal_ = WTERMSIG(status);
    status_ = exit_signal_base + term_signal_;
  }
  reclaim_terminal();
  return true;
}

void Child::reclaim_terminal() {
  if (!owns_terminal_) return;
  owns_terminal_ = false;
  give_terminal(::getpgrp());
}

}  // namespace dblock

#include "core/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/exit_code.hpp"
#include "core/fd_passing.hpp"
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
  for (const auto& name : spec.late_env) {
    // Room for the value, filled in by the guard when it is told to start.
    std::string slot = name;
    slot += '=';
    slot.append(Child::late_value_max, '\0');
    env.push_back(std::move(slot));
  }
  return env;
}

// execvp's PATH search, done before fork so the forked processes only call execve. Returns
// the path to execute, or sets *err to ENOENT (nothing found) or EACCES (found, not executable).
std::string resolve_command(const std::string& name, const std::vector<std::string>& env, int* err) {
  *err = 0;
  if (name.empty()) {
    *err = ENOENT;
    return {};
  }
  if (name.find('/') != std::string::npos) return name;
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& e : env)
    if (e.starts_with("PATH=")) path = e.substr(5);
  int found_err = ENOENT;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t end = path.find(':', begin);
    std::string dir = path.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    struct stat st{};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
      found_err = EACCES;
    }
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  *err = found_err;
  return {};
}

// What the guard tells dblock, one fixed-size record per write (atomic on a pipe).
struct GuardReport {
  enum Kind : std::int32_t { started = 1, exec_failed = 2, exited = 3, job_gone = 4, fork_failed = 5 };
  std::int32_t kind;
  std::int32_t value;  // started: pid; exec_failed, fork_failed: errno; exited: the waitpid status; job_gone: 0
};

// What dblock may send the guard once the command has ended (Child::wait_for_job): wait until
// the rest of the job is gone too, or kill what is left of it. Closing the socket lets it go.
constexpr char wait_request = 'w';
constexpr char kill_request = 'k';

// Everything the guard needs, prepared before fork: after fork only async-signal-safe calls.
struct GuardPlan {
  const char* path;
  char* const* argv;
  char* const* sh_argv;  // {"sh", path, args...}: execvp's fallback for scripts without #!
  char* const* envp;
  char* late_values[Child::late_vars_max];  // inside envp: where each late variable's value goes, or nullptr
  int control;           // the guard's end of the control socket: EOF when dblock is gone
  int status;            // write end: GuardReports
  bool same_session;     // stay in dblock's session: the command may be given its terminal
  int dblock_ends[2];    // dblock's ends of both, open in the forked guard until it closes them
};

// What dblock sends once the lock is granted (one datagram), with the descriptor the guard
// must keep, if any, attached as SCM_RIGHTS.
struct StartMessage {
  std::int32_t interactive;
  char late_values[Child::late_vars_max][Child::late_value_max + 1];
};

void write_report(int fd, GuardReport::Kind kind, int value) {
  const GuardReport r{kind, value};
  while (::write(fd, &r, sizeof r) < 0 && errno == EINTR) {
  }
}

std::int64_t monotonic_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// Overwrites, in this process's copy of the environment block it was started with, the value
// of every variable in names: /proc/PID/environ shows that block, not `environ`, so unsetenv
// alone would leave the DSN readable by the command through /proc/$PPID/environ.
void scrub_environment(const char* const* names) {
  for (char** e = environ; e && *e; ++e)
    for (const char* const* n = names; *n; ++n) {
      const std::size_t len = std::strlen(*n);
      if (std::strncmp(*e, *n, len) == 0 && (*e)[len] == '=') std::memset(*e + len + 1, 0, std::strlen(*e + len + 1));
    }
}

// SIGKILL to every child of the guard, and to the process group each child leads (a child
// that called setsid or setpgid may lead one). Returns how many children there were.
int kill_children() {
  char path[64] = "/proc/self/task/";
  char* p = path + std::strlen(path);
  char digits[16];
  int n = 0;
  for (pid_t v = ::getpid(); v > 0; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  while (n > 0) *p++ = digits[--n];
  std::strcpy(p, "/children");
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  int count = 0;
  long pid = 0;
  char buf[512];
  ssize_t got;
  while ((got = ::read(fd, buf, sizeof buf)) > 0) {
    for (ssize_t i = 0; i < got; ++i) {
      if (buf[i] >= '0' && buf[i] <= '9') {
        pid = pid * 10 + (buf[i] - '0');
      } else if (pid > 0) {
        ::kill(static_cast<pid_t>(pid), SIGKILL);
        ::kill(static_cast<pid_t>(-pid), SIGKILL);
        ++count;
        pid = 0;
      }
    }
  }
  if (pid > 0) {
    ::kill(static_cast<pid_t>(pid), SIGKILL);
    ::kill(static_cast<pid_t>(-pid), SIGKILL);
    ++count;
  }
  ::close(fd);
  return count;
}

// dblock is gone: kill the job's process group and every descendant that reaches us as an
// orphan, until nothing is left (bounded: a process stuck in the kernel cannot hold us forever).
[[noreturn]] void kill_job_and_exit(pid_t pgid) {
  const std::int64_t give_up = monotonic_ms() + Child::kill_give_up.count();
  for (;;) {
    ::kill(-pgid, SIGKILL);
    kill_children();
    int st;
    pid_t r;
    while ((r = ::waitpid(-1, &st, WNOHANG)) > 0) {
    }
    if (r < 0 && errno == ECHILD && ::kill(-pgid, 0) < 0) ::_exit(0);
    if (monotonic_ms() > give_up) ::_exit(1);
    const timespec pause{0, 2'000'000};
    ::nanosleep(&pause, nullptr);
  }
}

// Waits for dblock's start message. False when dblock closed the socket instead (the lock was
// busy, or dblock is gone) or sent something malformed.
bool receive_start(int control, StartMessage* message, int* keep_open) {
  alignas(cmsghdr) char control_buf[CMSG_SPACE(sizeof(int))];
  iovec iov{message, sizeof *message};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control_buf;
  msg.msg_controllen = sizeof control_buf;
  ssize_t n;
  do {
    n = ::recvmsg(control, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  *keep_open = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(keep_open, CMSG_DATA(c), sizeof(int));
  return n == static_cast<ssize_t>(sizeof *message);
}

// The command's process between clone and execve. It shares the guard's memory until then
// (CLONE_VM | CLONE_VFORK: no page tables copied, no copy-on-write faults, the guard waits),
// so it makes system calls only and writes nothing but exec_errno.
struct CommandStart {
  const GuardPlan* plan;
  pid_t guard;
  bool interactive;
  int exec_errno;  // set when execve failed; 0 when the command runs
};

// The command's stack until execve: the guard is single-threaded and suspended meanwhile.
alignas(64) char command_stack[64 * 1024];

int command_main(void* arg) {
  auto* cs = static_cast<CommandStart*>(arg);
  const GuardPlan& plan = *cs->plan;
  ::setpgid(0, 0);
  // The guard outlives dblock on purpose, but nothing must outlive the guard.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != cs->guard) ::_exit(exit_signal_base + SIGKILL);
  if (cs->interactive) give_terminal(::getpid());
  reset_signals_for_exec();
  ::execve(plan.path, plan.argv, plan.envp);
  int err = errno;
  if (err == ENOEXEC) {
    ::execve("/bin/sh", plan.sh_argv, plan.envp);
    err = errno;
  }
  cs->exec_errno = err;
  ::_exit(err == ENOENT ? exit_not_found : exit_cannot_execute);
}

// The command has ended and dblock was told. The report woke dblock onto this CPU, where an exit
// now would run first: its teardown (about 0.1 ms), and often another process after it, would
// come before dblock sends the release, the handoff's next step. So the guard sleeps until
// dblock lets it go (Child::let_guard_go, once the release is done) and exits then. Woken any
// sooner, it took the CPU from dblock before the release was sent.
// Asked (wait_request: Child::wait_for_job) after a signal dblock passed on, it first waits for the rest of the job:
// the command's process group and every descendant that reached it as an orphan, reaped as
// they end, and says so (job_gone); told kill_request, it kills what is left, again at every
// step: a descendant killed there may be a guard of a dblock inside the command (a nested run),
// whose own job then reaches this guard as orphans, alive, only after that kill. A dblock gone
// meanwhile leaves nobody to wait for the job, so what is left is killed as in kill_job_and_exit.
[[noreturn]] void exit_when_let_go(int control, int status, pid_t pgid) {
  char byte = 0;
  ssize_t r;
  while ((r = ::read(control, &byte, 1)) < 0 && errno == EINTR) {
  }
  if (r <= 0 || byte != wait_request) ::_exit(0);
  bool killing = false;
  for (;;) {
    if (killing) {
      ::kill(-pgid, SIGKILL);
      kill_children();
    }
    int st;
    pid_t reaped;
    while ((reaped = ::waitpid(-1, &st, WNOHANG)) > 0) {
    }
    if (reaped < 0 && errno == ECHILD && ::kill(-pgid, 0) < 0) {
      write_report(status, GuardReport::job_gone, 0);
      while ((r = ::read(control, &byte, 1)) < 0 && errno == EINTR) {
      }
      ::_exit(0);
    }
    pollfd fd{control, POLLIN, 0};
    if (::poll(&fd, 1, 2) > 0) {
      while ((r = ::read(control, &byte, 1)) < 0 && errno == EINTR) {
      }
      if (r <= 0) kill_job_and_exit(pgid);
      if (byte == kill_request) killing = true;
    }
  }
}

[[noreturn]] void guard_main(const GuardPlan& plan) {
  // Out of dblock's process group, so `timeout`, `kill -9 -PGID` or a shell's job control,
  // aimed at dblock's group, cannot take the guard along and leave the job running with the
  // lock about to be freed. Out of its session too, unless the command must get dblock's
  // terminal (a session cannot hand its terminal to another session's group).
  if (plan.same_session) ::setpgid(0, 0);
  else ::setsid();
  // Orphaned descendants of the command (double forks, setsid) are reparented to us, so
  // they can still be found and killed when dblock dies.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  // The caller's descriptors stay open for the command, as with flock(1); dblock's own are
  // close-on-exec, and the guard is forked before any database connection exists.
  // dblock's ends must go at once: a guard holding the control socket's other end would never
  // read EOF when dblock dies.
  ::close(plan.dblock_ends[0]);
  ::close(plan.dblock_ends[1]);
  const char* const secret[] = {"DBLOCK_DSN", nullptr};
  scrub_environment(secret);
  // The watched signals stay blocked (inherited from dblock): a SIGINT or SIGTERM sent to
  // dblock's process group must not take the guard away. A dead dblock must not SIGPIPE it.
  struct sigaction ign{};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  ::sigaction(SIGPIPE, &ign, nullptr);

  StartMessage start{};
  int keep_open = -1;
  if (!receive_start(plan.control, &start, &keep_open)) ::_exit(0);  // nothing was started
  (void)keep_open;  // held, never used, until this process exits: after the whole job
  for (std::size_t i = 0; i < Child::late_vars_max; ++i) {
    if (!plan.late_values[i]) continue;
    start.late_values[i][Child::late_value_max] = '\0';
    std::memcpy(plan.late_values[i], start.late_values[i], sizeof start.late_values[i]);
  }

  CommandStart cs{&plan, ::getpid(), start.interactive != 0, 0};
  // Every signal stays blocked in both processes while they share memory: a handler running in
  // the command's process before its execve would scribble on the guard's (posix_spawn does
  // the same). The command sets its own mask before execve.
  sigset_t all, before;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, &before);
  // CLONE_VFORK: the guard resumes once the command has called execve or exited, so
  // cs.exec_errno is final here.
  const pid_t cmd = ::clone(command_main, command_stack + sizeof command_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &cs);
  const int clone_errno = errno;
  ::sigprocmask(SIG_SETMASK, &before, nullptr);
  if (cmd < 0) {
    write_report(plan.status, GuardReport::fork_failed, clone_errno);
    ::_exit(0);
  }
  // The command made its own process group before the guard resumed, so the group exists
  // before anyone can signal it.
  if (cs.exec_errno != 0) {
    int st;
    while (::waitpid(cmd, &st, 0) < 0 && errno == EINTR) {
    }
    write_report(plan.status, GuardReport::exec_failed, cs.exec_errno);
    ::_exit(0);
  }
  write_report(plan.status, GuardReport::started, cmd);

  // A pidfd turns the command's exit into a readable descriptor; without one (old kernels)
  // the loop looks every 10 ms.
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, cmd, 0));
  for (;;) {
    pollfd fds[2] = {{plan.control, POLLIN, 0}, {pidfd, POLLIN, 0}};
    const int ready = ::poll(fds, 2, pidfd >= 0 ? -1 : 10);
    if (ready > 0 && fds[0].revents) {
      char byte;
      ssize_t r;
      do {
        r = ::read(plan.control, &byte, 1);
      } while (r < 0 && errno == EINTR);
      if (r <= 0) kill_job_and_exit(cmd);  // dblock is gone
    }
    int st;
    pid_t r;
    // Reaps orphans that reached us too; the command's own end is reported.
    while ((r = ::waitpid(-1, &st, WNOHANG)) > 0) {
      if (r == cmd) {
        write_report(plan.status, GuardReport::exited, st);
        exit_when_let_go(plan.control, plan.status, cmd);
      }
    }
  }
}

bool read_report(int fd, GuardReport* r) {
  ssize_t n;
  do {
    n = ::read(fd, r, sizeof *r);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(sizeof *r);
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

void UniqueFd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<Child> Child::prepare(const ChildSpec& spec) {
  if (spec.argv.empty()) return fail(ErrorKind::usage, "no command given");

  std::vector<std::string> env_strings = build_environment(spec);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  if (spec.late_env.size() > late_vars_max) return fail(ErrorKind::internal, "prepare: too many late variables");
  // The late variables are the last entries of the environment, in spec order.
  GuardPlan plan{};
  const std::size_t first_late = env_strings.size() - spec.late_env.size();
  for (std::size_t i = 0; i < spec.late_env.size(); ++i)
    plan.late_values[i] = env_strings[first_late + i].data() + spec.late_env[i].size() + 1;
  std::vector<std::string> argv_strings = spec.argv;
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  Child child;
  int resolve_err = 0;
  std::string path = resolve_command(spec.argv.front(), env_strings, &resolve_err);
  if (resolve_err) {
    child.exec_errno_ = resolve_err;
    child.done_ = true;
    child.status_code_ = child.exec_failure_status();
    return child;
  }
  std::string sh = "sh";
  std::vector<char*> sh_argv{sh.data(), path.data()};
  for (std::size_t i = 1; i < argv_strings.size(); ++i) sh_argv.push_back(argv_strings[i].data());
  sh_argv.push_back(nullptr);

  // A datagram socket, not a pipe: the start message carries the session's descriptor, and
  // the guard still reads EOF when dblock's end closes.
  int control[2], status[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, control) != 0)
    return fail(ErrorKind::internal, std::string("socketpair: ") + std::strerror(errno));
  if (::pipe2(status, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(control[0]);
    ::close(control[1]);
    return fail(ErrorKind::internal, std::string("pipe: ") + std::strerror(err));
  }
  plan.path = path.c_str();
  plan.argv = argv.data();
  plan.sh_argv = sh_argv.data();
  plan.envp = envp.data();
  plan.control = control[0];
  plan.status = status[1];
  plan.same_session = terminal_is_ours();
  plan.dblock_ends[0] = control[1];
  plan.dblock_ends[1] = status[0];
  child.same_session_ = plan.same_session;
  const pid_t guard = ::fork();
  const int fork_errno = errno;
  if (guard == 0) guard_main(plan);
  ::close(control[0]);
  ::close(status[1]);
  child.control_ = UniqueFd(control[1]);
  child.status_ = UniqueFd(status[0]);
  if (guard < 0) {
    child.fork_errno_ = fork_errno;
    child.done_ = true;
    child.status_code_ = exit_no_process;
    return child;
  }
  child.guard_ = guard;
  return child;
}

Result<void> Child::start(std::span<const std::string> late_values, int keep_open_fd) {
  if (done_ || guard_ <= 0 || pid_ > 0) return {};  // exec_errno() already says why
  if (late_values.size() > late_vars_max) return fail(ErrorKind::internal, "start: too many values");
  for (const auto& value : late_values)
    if (value.size() > late_value_max) return fail(ErrorKind::internal, "start: value too long");
  StartMessage message{};
  const bool interactive = same_session_ && terminal_is_ours();
  message.interactive = interactive;
  for (std::size_t i = 0; i < late_values.size(); ++i)
    std::memcpy(message.late_values[i], late_values[i].data(), late_values[i].size());
  iovec iov{&message, sizeof message};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  PassedFd passed;
  if (keep_open_fd >= 0) passed.attach(msg, keep_open_fd);
  ssize_t sent;
  do {
    sent = ::sendmsg(control_.get(), &msg, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);

  GuardReport first{};
  if (sent != static_cast<ssize_t>(sizeof message) || !read_report(status_.get(), &first)) {
    control_.reset();  // a guard still waiting for the message ends at EOF
    reap_guard();
    done_ = true;
    return fail(ErrorKind::internal, "the process that starts the command died before starting it");
  }
  if (first.kind == GuardReport::exec_failed || first.kind == GuardReport::fork_failed) {
    (first.kind == GuardReport::exec_failed ? exec_errno_ : fork_errno_) = first.value;
    done_ = true;
    status_code_ = exec_errno_ ? exec_failure_status() : exit_no_process;
    reap_guard();
    return {};
  }
  pid_ = first.value;
  ::fcntl(status_.get(), F_SETFL, O_NONBLOCK);
  if (interactive) {
    give_terminal(pid_);
    owns_terminal_ = true;
  }
  return {};
}

Child& Child::operator=(Child&& o) noexcept {
  if (this == &o) return *this;
  control_ = std::move(o.control_);
  status_ = std::move(o.status_);
  pid_ = std::exchange(o.pid_, -1);
  guard_ = std::exchange(o.guard_, -1);
  exec_errno_ = o.exec_errno_;
  fork_errno_ = o.fork_errno_;
  done_ = o.done_;
  status_code_ = o.status_code_;
  term_signal_ = o.term_signal_;
  owns_terminal_ = std::exchange(o.owns_terminal_, false);
  same_session_ = o.same_session_;
  return *this;
}

void Child::let_guard_go() {
  if (done_) control_.reset();
}

bool Child::wait_for_job(Millis kill_at, Millis give_up_at) {
  if (!done_ || guard_ <= 0 || control_.get() < 0) return true;
  auto send = [this](char c) { return ::send(control_.get(), &c, 1, MSG_NOSIGNAL) == 1; };
  if (!send(wait_request)) return false;
  bool killed = false;
  for (;;) {
    const Millis now = boottime_now();
    if (!killed && now >= kill_at) {
      (void)send(kill_request);  // a guard gone meanwhile says so below (EOF)
      killed = true;
    }
    if (now >= give_up_at) return false;
    const Millis until = killed ? give_up_at : std::min(kill_at, give_up_at);
    pollfd fd{status_.get(), POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(std::max<std::int64_t>((until - now).count(), 0))) < 0 && errno != EINTR) return false;
    GuardReport r{};
    const ssize_t n = ::read(status_.get(), &r, sizeof r);
    if (n == static_cast<ssize_t>(sizeof r) && r.kind == GuardReport::job_gone) return true;
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return false;  // the guard is gone
  }
}

Child::~Child() {
  // Closing the control pipe while the command runs makes the guard kill the whole job.
  control_.reset();
  if (guard_ > 0) reap_guard();
}

int Child::exec_failure_status() const {
  return exec_errno_ == ENOENT ? exit_not_found : exit_cannot_execute;
}

void Child::signal_group(int sig) const {
  if (pid_ > 0 && !done_) ::kill(-pid_, sig);
}

bool Child::poll_exit() {
  if (done_) return true;
  GuardReport r{};
  const ssize_t n = ::read(status_.get(), &r, sizeof r);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
  if (n == static_cast<ssize_t>(sizeof r) && r.kind == GuardReport::exited) {
    finish(r.value);
    // The guard waits to be let go (let_guard_go, after the release) and is reaped by the
    // destructor, so the handoff to the next holder waits neither for its exit nor its reaping.
    return true;
  } else {
    // The guard died without a word (killed by someone): nothing would stop the job any
    // more, so stop it here and report it as killed.
    ::kill(-pid_, SIGKILL);
    finish(SIGKILL);  // a wait status meaning "killed by SIGKILL"
  }
  reap_guard();
  return true;
}

void Child::finish(int wait_status) {
  done_ = true;
  if (WIFEXITED(wait_status)) {
    status_code_ = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    term_signal_ = WTERMSIG(wait_status);
    status_code_ = exit_signal_base + term_signal_;
  }
  reclaim_terminal();
}

void Child::reap_guard() {
  if (guard_ <= 0) return;
  int st;
  while (::waitpid(guard_, &st, 0) < 0 && errno == EINTR) {
  }
  guard_ = -1;
}

void Child::reclaim_terminal() {
  if (!owns_terminal_) return;
  owns_terminal_ = false;
  give_terminal(::getpgrp());
}

}  // namespace dblock

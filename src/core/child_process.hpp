#pragma once
// The command under `run` (man page: "THE COMMAND"). dblock forks a small guard process, and
// the guard forks the command into its own process group:
//
//   dblock ──control socket──▶ guard (child subreaper) ──▶ command (process group leader)
//          ◀───status pipe────
//
// The guard exists for the one case dblock cannot handle itself: dblock killed by SIGKILL
// (the OOM killer, an impatient operator, `timeout -s KILL`, a kill of dblock's whole process
// group). The guard therefore leaves dblock's process group (and session, unless the run is
// interactive), so nothing aimed at dblock's group reaches it. Only dblock holds the control socket's other end,
// so the guard reads EOF the moment dblock dies; it then kills the command's process group
// and every descendant that left it (as a subreaper it inherits each orphan), waits until all
// of them are gone, and only then exits. For session strategies the guard also holds a
// duplicate of the lock session's socket, so the server sees the session end, and frees the
// lock, only after the whole job is dead.
//
// The guard is forked before the lock is asked for (Child::prepare) and told to start the
// command once it is granted (Child::start): the fork of dblock is then not part of the
// handoff from one holder to the next. `run` forks it before the DSN is parsed, so a server
// backend's module and client libraries are never in the guard's address space. At the
// handoff the guard spawns the command with clone(CLONE_VM | CLONE_VFORK), as posix_spawn
// does: no page tables copied, no copy-on-write faults (posix_spawn itself cannot set the
// parent-death signal). A guard told nothing exits when dblock closes the socket (the lock
// was busy, or the DSN was bad). Once the command has ended and the guard has said so, it waits
// for that close too (dblock closes once the release is done), so that its exit is not on the
// handoff's path.

#include <sys/types.h>

#include <string>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "core/clock.hpp"
#include "core/error.hpp"

namespace dblock {

struct ChildSpec {
  std::vector<std::string> argv;                             // argv[0] is looked up in PATH
  std::vector<std::pair<std::string, std::string>> set_env;  // added or replaced
  std::vector<std::string> unset_env;                        // removed (DBLOCK_DSN...)
  /// Variables whose values are known only when the command starts (the fencing token, a
  /// semaphore's slot): their values travel with Child::start, at most Child::late_value_max
  /// bytes each, at most Child::late_vars_max of them.
  std::vector<std::string> late_env;
};

/// Owns a file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  void reset();

 private:
  int fd_ = -1;
};

/// A started command. Destroying it while the command runs closes the control pipe, which
/// makes the guard kill the whole job: no path out of dblock leaves the job running.
class Child {
 public:
  /// How long what is left of a job may take to die of SIGKILL (a process in the kernel, an
  /// overloaded machine) before the guard, or dblock, stops waiting for it.
  static constexpr Millis kill_give_up{5000};
  static constexpr std::size_t late_value_max = 63;
  static constexpr std::size_t late_vars_max = 2;

  /// Resolves argv[0] in PATH and forks the guard, which waits to be told to start; call it
  /// from the main thread with the watched signals blocked and no other thread running.
  /// A command that cannot be found, or a guard that cannot be forked, is not an error here:
  /// exec_errno() or fork_errno() says why, and start() then does nothing.
  static Result<Child> prepare(const ChildSpec& spec);
  /// The guard forks and execs the command with spec.late_env set to late_values; it keeps
  /// keep_open_fd (the lock session's socket, or -1) until the job is dead. When the fork or
  /// exec fails the command and the guard are reaped here and fork_errno() or exec_errno() says why.
  Result<void> start(std::span<const std::string> late_values, int keep_open_fd);

  Child() = default;
  Child(Child&& o) noexcept { *this = std::move(o); }
  /// The moved-from Child forgets the guard, so only one owner ever waits for it.
  Child& operator=(Child&& o) noexcept;
  ~Child();

  pid_t pid() const { return pid_; }
  /// 0 when the command started; else the errno of the failed exec.
  int exec_errno() const { return exec_errno_; }
  /// 127 for "not found", 126 for any other exec failure (as env(1)).
  int exec_failure_status() const;
  /// 0, or the errno of the fork (the guard's in prepare, the command's in start) that found no
  /// process to be had: EAGAIN for a process limit, ENOMEM. The command never ran; the status
  /// is exit_no_process, not an exec failure's.
  int fork_errno() const { return fork_errno_; }

  /// Readable when the command has ended (or the guard died): poll it, then call poll_exit().
  int exit_fd() const { return status_.get(); }
  /// Sends sig to the command's whole process group.
  void signal_group(int sig) const;
  /// Collects the command's end if it has come; true then, and exit_status()/term_signal() are set.
  bool poll_exit();
  bool exited() const { return done_; }
  /// The status dblock passes on: the command's exit code, or 128+N if it died of signal N.
  int exit_status() const { return status_code_; }
  /// N if the command died of signal N, else 0.
  int term_signal() const { return term_signal_; }
  /// Gives the terminal back to dblock's group if the command had it.
  void reclaim_terminal();
  /// Once the command has ended: the guard, which waits after its report so that its exit is
  /// not on the handoff's path, may exit now (the destructor reaps it). Nothing while the
  /// command runs.
  void let_guard_go();
  /// Once the command has ended, after a signal dblock passed on to its group: waits until the
  /// rest of the job (the group, and every descendant that reached the guard as an orphan) is
  /// gone too, so that no part of a job told to stop outlives the lock. SIGKILL to what is left
  /// at `kill_at` (boottime_now()'s clock); false when it is still not gone at `give_up_at`, or
  /// the guard cannot tell.
  bool wait_for_job(Millis kill_at, Millis give_up_at);

 private:
  void finish(int wait_status);
  void reap_guard();

  pid_t pid_ = -1;
  pid_t guard_ = -1;
  UniqueFd control_;  // dblock's end of the control socket; only dblock holds it
  UniqueFd status_;   // read end of what the guard reports
  int exec_errno_ = 0;
  int fork_errno_ = 0;
  bool done_ = false;
  int status_code_ = 0;
  int term_signal_ = 0;
  bool owns_terminal_ = false;
  bool same_session_ = false;  // the guard stayed in dblock's session (an interactive run)
};

}  // namespace dblock

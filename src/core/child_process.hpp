#pragma once
// The command under `run` (SPEC 6): fork + execvp into its own process group, dying with
// dblock (PR_SET_PDEATHSIG), foreground on a terminal, with a chosen environment.

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace dblock {

struct ChildSpec {
  std::vector<std::string> argv;                          // argv[0] is looked up in PATH
  std::vector<std::pair<std::string, std::string>> set_env;  // added or replaced
  std::vector<std::string> unset_env;                     // removed (DBLOCK_DSN...)
};

/// A started command. The destructor does not wait: run_job decides when to reap.
class Child {
 public:
  /// Forks and execs; must be called from the main thread with the watched signals blocked.
  /// When exec fails the child is reaped here and exec_errno() says why.
  static Result<Child> start(const ChildSpec& spec);

  pid_t pid() const { return pid_; }
  /// 0 when the command started; else the errno of the failed exec.
  int exec_errno() const { return exec_errno_; }
  /// 127 for "not found", 126 for any other exec failure (as env(1)).
  int exec_failure_status() const;

  /// Sends sig to the command's whole process group.
  void signal_group(int sig) const;
  /// Reaps the command if it ended; true then, and exit_status()/term_signal() are set.
  bool poll_exit();
  bool exited() const { return done_; }
  /// The status dblock passes on: the command's exit code, or 128+N if it died of signal N.
  int exit_status() const { return status_; }
  /// N if the command died of signal N, else 0.
  int term_signal() const { return term_signal_; }
  /// Gives the terminal back to dblock's group if the command had it.
  void reclaim_terminal();

 private:
  pid_t pid_ = -1;
  int exec_errno_ = 0;
  bool done_ = false;
  int status_ = 0;
  int term_signal_ = 0;
  bool owns_terminal_ = false;
};

}  // namespace dblock

#!/usr/bin/env python3
"""A start storm: N copies of a command released at the same instant, as cron starts a crontab
line on every host of a farm at 02:00:00. Used by scripts/bench.sh (section storm) and by
tests/faults/fault_start_storm.sh.

    storm.py [--nice N] N OUT ERR -- COMMAND [ARG...]

Every contender is forked first and blocks on a pipe; closing the pipe's write end releases
them all at once (the start), and each then execs COMMAND. With --nice N the contenders run at
niceness N in a scheduling group of their own (a new session: Linux's autogroup, whose nice
value weighs the whole group against the others), the farm's model on one machine: each host
brings its own CPU and the server has its own, so the contenders' start-up must not take the
server's share of the cores. Without the group, a thousand processes at nice 19 would still
weigh as much as the server's group, as a sibling group. Writes OUT: one line per contender,
"EXIT_CODE MS" (ms from the start to its exit, in exit order; a contender killed by signal N
shows 128+N). Their stderr goes to ERR. Prints "exits CODE=COUNT ..., last MS, last_loser MS,
cpu S": the last exit of all, the last exit of a contender that did not exit 0 (the winner's
own command decides when it ends), and the CPU time (user + system) all of them used.
"""
import os
import sys
import time


def demote_group(niceness: int) -> None:
    """This process and the contenders it forks: one scheduling group at `niceness`."""
    try:
        os.setsid()
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(niceness))
    except OSError:
        pass  # a process group leader, or no autogroup: the niceness of each contender alone


def main() -> int:
    args = sys.argv[1:]
    niceness = 0
    if args[:1] == ["--nice"] and len(args) > 1:
        niceness, args = int(args[1]), args[2:]
    if len(args) < 5 or args[3] != "--":
        print(__doc__, file=sys.stderr)
        return 64
    n, out, err, command = int(args[0]), args[1], args[2], args[4:]
    if niceness:
        demote_group(niceness)
    gate_r, gate_w = os.pipe()
    err_fd = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            os.close(gate_w)
            os.nice(niceness)  # within the group too, so this process times their exits promptly
            os.read(gate_r, 1)  # EOF when the parent closes the write end: the start
            os.close(gate_r)
            os.dup2(err_fd, 2)
            os.close(err_fd)
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            os.dup2(devnull, 1)
            try:
                os.execvp(command[0], command)
            finally:
                os._exit(127)
        pids.append(pid)
    os.close(gate_r)
    os.close(err_fd)
    start = time.monotonic()
    os.close(gate_w)
    exits = []
    for _ in range(n):
        _, status = os.wait()
        ms = (time.monotonic() - start) * 1000
        code = os.waitstatus_to_exitcode(status)
        exits.append((128 - code if code < 0 else code, ms))
    with open(out, "w") as f:
        for code, ms in exits:
            f.write(f"{code} {ms:.0f}\n")
    counts = {}
    for code, _ in exits:
        counts[code] = counts.get(code, 0) + 1
    losers = [ms for code, ms in exits if code != 0]
    print("exits " + " ".join(f"{c}={counts[c]}" for c in sorted(counts)) +
          f", last {max(ms for _, ms in exits):.0f}, last_loser {max(losers) if losers else 0:.0f}" +
          f", cpu {os.times().children_user + os.times().children_system:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

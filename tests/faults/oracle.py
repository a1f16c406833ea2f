#!/usr/bin/env python3
"""The fault suite's oracle: reads a log written by oracle_job.sh (and oracle_end) and checks
that no two runs overlapped, that tokens strictly increase in start order and that the
expected number of runs happened.  Usage: oracle.py check LOG EXPECTED_RUNS [ALLOWED_MS]
ALLOWED_MS: an overlap up to this many ms is reported but accepted (a documented window).

oracle.py tokens LOG MIN_RUNS HISTORY_JSON: the token checks of a semaphore's runs
(semaphore_job.sh), which may overlap: every token is given once, a run acquired after another
one's command had ended has the greater token, and at least MIN_RUNS runs started. A run's
acquisition is known from below by its history row's started_at (`dblock history --json`: the
take's own time on the database's clock, this host's), not by its command's start, which a
loaded machine can delay past a whole shorter run of the other slot. (How many ran at once is
semaphore_job.sh's own check, with flock.)"""
import json
import sys
from datetime import datetime


def read_log(path):
    """Start and end times (ns) by token; the first end of a token wins (a job's own, or the
    test's oracle_end). Raises ValueError naming a token that started twice."""
    starts, ends = {}, {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 3:
                continue
            kind, token, ns = parts[0], parts[1], int(parts[2])
            if kind == "start":
                if token in starts:
                    raise ValueError(f"token {token} started twice")
                starts[token] = ns
            elif kind == "end":
                ends.setdefault(token, ns)
    return starts, ends


def check(path, expected, allowed_ms=0.0):
    try:
        starts, ends = read_log(path)
    except ValueError as e:
        return str(e)
    order = list(starts)
    problems = []
    if len(starts) != expected:
        problems.append(f"{len(starts)} runs, expected {expected}")
    order.sort(key=lambda t: starts[t])
    try:
        tokens = [int(t) for t in order]
    except ValueError:
        return f"a run has no token: {order}"
    if any(b <= a for a, b in zip(tokens, tokens[1:])):
        problems.append(f"tokens not increasing in start order: {tokens}")
    gaps = []
    for i, t in enumerate(order):
        end = ends.get(t)
        for later in order[i + 1:]:
            if end is None or starts[later] < end - allowed_ms * 1e6:
                over = "open" if end is None else f"{(end - starts[later]) / 1e6:.1f} ms"
                problems.append(f"token {t} overlaps token {later} ({over})")
        if i + 1 < len(order) and end is not None:
            gaps.append((starts[order[i + 1]] - end) / 1e6)
    if problems:
        return "; ".join(problems)
    summary = f"{len(starts)} runs, tokens {tokens[0] if tokens else '-'}..{tokens[-1] if tokens else '-'}"
    if gaps:
        summary += f", smallest gap {min(gaps):.1f} ms" + (" (negative: an accepted overlap)" if min(gaps) < 0 else "")
    print(summary)
    return None


def acquired_ms(history_path):
    """Token -> started_at of its history row, in ms since the epoch. A killed holder leaves
    no row."""
    with open(history_path) as f:
        runs = json.load(f)["runs"]
    return {int(r["token"]): datetime.fromisoformat(r["started_at"].replace("Z", "+00:00")).timestamp() * 1000
            for r in runs}


def tokens(path, min_runs, history_path):
    try:
        starts, ends = read_log(path)
    except ValueError as e:
        return str(e)
    try:
        runs = sorted((ns, int(t)) for t, ns in starts.items())
    except ValueError:
        return "a run has no token"
    acquired = acquired_ms(history_path)
    problems = []
    if len(runs) < min_runs:
        problems.append(f"{len(runs)} runs, expected at least {min_runs}")
    # Every run that ended had its history row written by its release; a run killed with its
    # holder has none. Most must have one, or the check below would prove nothing.
    known = [(acquired[t], t) for _, t in runs if t in acquired]
    if 2 * len(known) < len(runs):
        problems.append(f"only {len(known)} of {len(runs)} runs have a history row")
    # Happens-before: a run acquired after another run's command ended has the greater token.
    finished = sorted((ns / 1e6, int(t)) for t, ns in ends.items() if t in starts)
    highest_ended, i, checked = None, 0, 0
    for at, token in sorted(known):
        while i < len(finished) and finished[i][0] < at:
            highest_ended = finished[i][1] if highest_ended is None else max(highest_ended, finished[i][1])
            i += 1
        if highest_ended is not None:
            checked += 1
            if token <= highest_ended:
                problems.append(f"token {token} was acquired after token {highest_ended} had ended")
    if problems:
        return "; ".join(problems[:5])
    if not runs:
        print("no runs")
        return None
    inversions = sum(1 for a, b in zip(runs, runs[1:]) if b[1] < a[1])
    print(f"{len(runs)} runs, tokens {min(t for _, t in runs)}..{max(t for _, t in runs)}, all distinct;"
          f" {checked} acquired after an end, each with a greater token;"
          f" {inversions} neighbours started in the other order (concurrent holders)")
    return None


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "tokens":
        problem = tokens(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        if problem:
            print(problem)
            return 1
        return 0
    if len(sys.argv) not in (4, 5) or sys.argv[1] != "check":
        print(__doc__, file=sys.stderr)
        return 64
    problem = check(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]) if len(sys.argv) == 5 else 0.0)
    if problem:
        print(problem)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The fault suite's oracle: reads a log written by oracle_job.sh (and oracle_end) and checks
that no two runs overlapped, that tokens strictly increase in start order and that the
expected number of runs happened.  Usage: oracle.py check LOG EXPECTED_RUNS [ALLOWED_MS]
ALLOWED_MS: an overlap up to this many ms is reported but accepted (a documented window)."""
import sys


def check(path, expected, allowed_ms=0.0):
    starts, ends = {}, {}
    order = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 3:
                continue
            kind, token, ns = parts[0], parts[1], int(parts[2])
            if kind == "start":
                if token in starts:
                    return f"token {token} started twice"
                starts[token] = ns
                order.append(token)
            elif kind == "end":
                ends.setdefault(token, ns)  # the first end wins (a job's own, or the test's)
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


def main():
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

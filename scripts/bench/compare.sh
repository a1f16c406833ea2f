#!/usr/bin/env bash
# Two builds through scripts/bench.sh, section by section in turn, and every row of one against
# the other: the check that a change keeps the bench (within 1.1x on every row, unless told).
#   scripts/bench/compare.sh OLD_DBLOCK NEW_DBLOCK
# Each section runs for one build and then the other, the order swapped from one section to the
# next (old new, new old, ...), so a machine that slows for some minutes spoils one section of
# both, not one build. The sections are bench.sh's (DBLOCK_BENCH_ONLY picks some, the other
# DBLOCK_BENCH_* knobs apply to both builds); DBLOCK_BENCH_OUT (default: ./bench-compare) gets
# old/ and new/ (each section's bench.txt and bench.csv) and compare.txt:
#   section  measurement  unit  old  new  new/old  verdict
# where a verdict of WORSE is a row of dblock's more than DBLOCK_BENCH_KEEP (1.1) times worse in
# its direction (lower is better for ms, s, x, KiB and counts, higher for 1/s and for a peer's
# figure over dblock's, "sqlite_lease.sh / dblock run"). A peer's own row (flock, the floors,
# etcdctl lock, the hand-written scripts, the proxy) is no build's: its verdict is "peer", and
# "peer moved" where it moved more than that between the two runs of its section, the host's
# drift, which the dblock rows of that section share. A row only one build has, or that failed
# in either, says so. Exits 1 if a row is WORSE or a section failed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 2 ] || { echo "usage: compare.sh OLD_DBLOCK NEW_DBLOCK" >&2; exit 64; }
for b in "$1" "$2"; do
  [ -x "$b" ] || { echo "compare.sh: no executable dblock at $b" >&2; exit 64; }
done
old=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
new=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
bench=${DBLOCK_BENCH_COMMAND:-$here/../bench.sh}  # a stand-in in e2e.bench_compare
out=${DBLOCK_BENCH_OUT:-bench-compare}
keep=${DBLOCK_BENCH_KEEP:-1.1}
# bench.sh's own list, in its order, unless told (one list of the sections, bench.sh's)
sections=${DBLOCK_BENCH_ONLY:-$(sed -n 's/^all_sections="\(.*\)"$/\1/p' "$here/../bench.sh")}
[ -n "$sections" ] || { echo "compare.sh: no all_sections=\"...\" line in $here/../bench.sh" >&2; exit 70; }
sections=${sections//,/ }
mkdir -p "$out/old" "$out/new"
out=$(cd "$out" && pwd)

status=0
turn=0
for s in $sections; do
  if [ $((turn % 2)) -eq 0 ]; then order="old new"; else order="new old"; fi
  turn=$((turn + 1))
  for which in $order; do
    if [ "$which" = old ]; then b=$old; else b=$new; fi
    echo "compare: $s, $which ($b)" >&2
    DBLOCK_BENCH_ONLY=$s DBLOCK_BENCH_OUT="$out/$which/$s" "$bench" "$b" >"$out/$which/$s.log" 2>&1 ||
      { echo "compare: $s, $which: bench.sh failed (some row FAILED: $out/$which/$s.log)" >&2; status=1; }
  done
done

# The rows of both, joined on section and measurement.
python3 - "$out" "$keep" "$sections" <<'PY' >"$out/compare.txt" || status=1
import csv, os, re, sys
out, keep, sections = sys.argv[1], float(sys.argv[2]), sys.argv[3].split()
def rows(which):
    r = {}
    for s in sections:
        p = os.path.join(out, which, s, "bench.csv")
        if not os.path.exists(p):
            continue
        for row in csv.DictReader(open(p)):
            if row["section"] == "machine":
                continue
            r[(row["section"], row["measurement"])] = row
    return r
# A side of a measurement that names a peer; a ratio "A / B" is the peer's if both sides are,
# and is better higher where only A is (a peer's time over dblock's).
peer = re.compile(r"flock|floor|etcdctl|_lease\.sh|delay proxy")
def kind(measurement):
    sides = measurement.split(" / ")
    if len(sides) == 2:
        a, b = (bool(peer.search(x)) for x in sides)
        return "peer" if a and b else ("inverted" if a else "dblock")
    return "peer" if peer.search(measurement) and "dblock" not in measurement else "dblock"
o, n = rows("old"), rows("new")
keys = list(dict.fromkeys(list(o) + list(n)))
worse = 0
print("%-10s %-52s %-5s %10s %10s %8s  %s" % ("section", "measurement", "unit", "old", "new", "new/old", "verdict"))
for k in keys:
    a, b = o.get(k), n.get(k)
    unit = (a or b)["unit"]
    am = a["median"] if a else "-"
    bm = b["median"] if b else "-"
    ratio, verdict = "", ""
    if a is None or b is None:
        verdict = "only in " + ("new" if a is None else "old")
    elif am == "FAILED" or bm == "FAILED":
        verdict = "FAILED in " + ", ".join(w for w, x in (("old", am), ("new", bm)) if x == "FAILED")
    else:
        x, y = float(am), float(bm)
        what = kind(k[1])
        higher_better = (unit == "1/s") != (what == "inverted")
        if x == 0 and y == 0:
            ratio, verdict = "1.00", "same"
        elif x == 0:  # errors 0 -> 3, say
            ratio = "-"
            verdict = "peer moved" if what == "peer" else ("better" if higher_better else "WORSE")
        else:
            r = y / x
            ratio = "%.2f" % r
            bad = (r < 1 / keep) if higher_better else (r > keep)
            good = (r > keep) if higher_better else (r < 1 / keep)
            if what == "peer":
                verdict = "peer moved" if bad or good else "peer"
            else:
                verdict = "WORSE" if bad else ("better" if good else "within %.2gx" % keep)
        if verdict == "WORSE":
            worse += 1
    print("%-10s %-52s %-5s %10s %10s %8s  %s" % (k[0], k[1][:52], unit, am, bm, ratio, verdict))
print()
# Each run's host line (scripts/bench.sh's probe before its section and at its end): how fast the
# machine was for each build's turn, which the peers' rows above show too.
for s in sections:
    for which in ("old", "new"):
        p = os.path.join(out, which, s, "bench.txt")
        line = next((l for l in open(p) if l.startswith("host speed")), "") if os.path.exists(p) else ""
        if line:
            print("host, %s, %s: %s" % (s, which, line.split(": ", 1)[1].strip()))
print("%d rows, %d worse than %.2gx" % (len(keys), worse, keep))
sys.exit(1 if worse else 0)
PY
cat "$out/compare.txt"
exit "$status"

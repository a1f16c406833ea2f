#!/usr/bin/env bash
# scripts/bench/compare.sh (README, Benchmarks), through a stand-in for scripts/bench.sh that
# writes fixed rows for each build: the sections run for both builds, the order swapped from one
# section to the next; a row of dblock's more than 1.1x worse in its direction is WORSE (a time
# up, a rate down, a peer's time over dblock's down, a count up from 0) and makes the exit 1; a
# peer's row that moved is "peer moved" and is not counted; failed rows and rows one build lacks
# say so; each run's host line is shown.
source "$(dirname "$0")/lib.sh"

d=$E2E_TMP/compare
mkdir -p "$d/old" "$d/new"
printf '#!/bin/sh\n' >"$d/old/dblock"
printf '#!/bin/sh\n' >"$d/new/dblock"
chmod +x "$d/old/dblock" "$d/new/dblock"
# The stand-in: bench.csv and bench.txt of DBLOCK_BENCH_ONLY's section; the build is the binary's
# folder's name. `ok` makes every row of the new build within 1.1x.
cat >"$d/bench.sh" <<'SH2'
#!/usr/bin/env bash
set -eu
which=$(basename "$(dirname "$1")") s=$DBLOCK_BENCH_ONLY
mkdir -p "$DBLOCK_BENCH_OUT"
echo "$s $which" >>"$STANDIN_LOG"
row() { printf '"%s","%s","%s",%s,,,5,""\n' "$s" "$1" "$2" "$3"; }
{
  echo 'section,measurement,unit,median,min,max,n,note'
  if [ "$which" = old ] || [ -n "${OK:-}" ]; then
    row "dblock run k -- true" ms 10.00; row "flock FILE true" ms 2.00; row "handoffs/s, sqlite lease" 1/s 200.00
    row "sqlite_lease.sh / dblock run (SQLite)" x 5.00; row "errors, sqlite lease" runs 0; row "dblock --version" ms 3.00
    row "only old" ms 1.00
  else
    row "dblock run k -- true" ms 11.50; row "flock FILE true" ms 3.00; row "handoffs/s, sqlite lease" 1/s 170.00
    row "sqlite_lease.sh / dblock run (SQLite)" x 4.00; row "errors, sqlite lease" runs 2; row "dblock --version" ms FAILED
    row "only new" ms 1.00
  fi
  echo '"machine","host speed","",,,,,"x"'
} >"$DBLOCK_BENCH_OUT/bench.csv"
echo "host speed (median of 15 flock FILE true, ms, before each section): $s 2.00, end 2.10; every section within 1.5x of the fastest" >"$DBLOCK_BENCH_OUT/bench.txt"
SH2
chmod +x "$d/bench.sh"

rc=0
STANDIN_LOG=$d/order DBLOCK_BENCH_COMMAND=$d/bench.sh DBLOCK_BENCH_ONLY=startup,handoff DBLOCK_BENCH_OUT=$d/out \
  "$DBLOCK_SOURCE_DIR/scripts/bench/compare.sh" "$d/old/dblock" "$d/new/dblock" >"$d/stdout" 2>"$d/stderr" || rc=$?
assert_eq "a worse row: exit 1" 1 "$rc"
assert_eq "each section for both builds, the order swapped" "startup old,startup new,handoff new,handoff old" "$(paste -sd, "$d/order")"
verdict() { grep -E "^$2 +$3 " "$d/$1/compare.txt" | awk '{ print $NF }'; }  # verdict OUT SECTION MEASUREMENT
assert_eq "a time 1.15x longer is WORSE" WORSE "$(verdict out startup 'dblock run k -- true')"
assert_eq "a rate 0.85x is WORSE" WORSE "$(verdict out startup 'handoffs/s, sqlite lease')"
assert_eq "a peer's time over dblock's down 0.8x is WORSE" WORSE "$(verdict out startup 'sqlite_lease.sh / dblock run')"
assert_eq "errors up from 0 is WORSE" WORSE "$(verdict out startup 'errors, sqlite lease')"
assert_eq "a peer that moved 1.5x is named, not counted" "moved" "$(verdict out startup 'flock FILE true')"
check "a failed row says which build" grep -Eq '^startup +dblock --version .*FAILED in new' "$d/out/compare.txt"
check "a row of one build says so" grep -Eq '^handoff +only old .*only in old' "$d/out/compare.txt"
check "the count: 8 rows a section, 4 of them worse" grep -q '^16 rows, 8 worse than 1.1x' "$d/out/compare.txt"
check "each run's host line" grep -q '^host, handoff, new: handoff 2.00, end 2.10' "$d/out/compare.txt"
check "the table is printed too" grep -q 'verdict' "$d/stdout"

rc=0
OK=1 STANDIN_LOG=$d/order2 DBLOCK_BENCH_COMMAND=$d/bench.sh DBLOCK_BENCH_ONLY=startup DBLOCK_BENCH_OUT=$d/out2 \
  "$DBLOCK_SOURCE_DIR/scripts/bench/compare.sh" "$d/old/dblock" "$d/new/dblock" >"$d/stdout2" 2>&1 || rc=$?
assert_eq "every row within: exit 0" 0 "$rc"
check "a row within 1.1x says so" grep -Eq '^startup +dblock run k -- true .* 1\.00  within 1\.1x$' "$d/out2/compare.txt"
check "an unmoved peer is a peer" grep -Eq '^startup +flock FILE true .* peer$' "$d/out2/compare.txt"
check "no row worse" grep -q '^7 rows, 0 worse than 1.1x' "$d/out2/compare.txt"

# No DBLOCK_BENCH_ONLY: every section of bench.sh's own list, in its order.
rc=0
OK=1 STANDIN_LOG=$d/order3 DBLOCK_BENCH_COMMAND=$d/bench.sh DBLOCK_BENCH_OUT=$d/out3 \
  "$DBLOCK_SOURCE_DIR/scripts/bench/compare.sh" "$d/old/dblock" "$d/new/dblock" >/dev/null 2>&1 || rc=$?
assert_eq "every section: exit 0" 0 "$rc"
assert_eq "bench.sh's sections, each once a build" \
  "$(sed -n 's/^all_sections="\(.*\)"$/\1/p' "$DBLOCK_SOURCE_DIR/scripts/bench.sh")" \
  "$(awk 'NR % 2 == 1 { printf "%s%s", (NR > 1 ? " " : ""), $1 }' "$d/order3")"
finish

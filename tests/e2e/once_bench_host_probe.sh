#!/usr/bin/env bash
# scripts/bench.sh's host probe (README, Benchmarks): before each section and at the end the
# bench times 15 runs of `flock FILE true`, and names every section whose probe before or after
# it ran over 1.5x the fastest, so a table measured through a slow window of a shared host says
# so. A real probe writes "WHEN MEDIAN_MS"; the verdict over a file of probes names exactly the
# sections next to a slow one, and none when all are close.
source "$(dirname "$0")/lib.sh"

tmp=$E2E_TMP/bench
mkdir -p "$tmp"
# shellcheck source=../../scripts/bench/lib.sh
. "$DBLOCK_SOURCE_DIR/scripts/bench/lib.sh"

: >"$tmp/probes"
host_probe startup
host_probe end
check "a probe is one line, the section and a median in ms" \
  grep -Eq '^startup [0-9]+\.[0-9]{2}$' "$tmp/probes"
check "one line a probe" [ "$(wc -l <"$tmp/probes")" -eq 2 ]

printf '%s\n' "startup 2.00" "fsync 2.10" "handoff 5.30" "throughput 2.05" "end 1.95" >"$tmp/probes"
host_verdict
assert_eq "a slow probe names the sections on either side of it" "fsync handoff" "$host_slow"
check "the line says so" grep -q 'SLOW HOST WINDOW in fsync handoff' <<<"$host_line"
check "the line gives every probe" grep -q 'startup 2.00, fsync 2.10, handoff 5.30, throughput 2.05, end 1.95' <<<"$host_line"

printf '%s\n' "startup 2.00" "storm 3.90" >"$tmp/probes"
host_verdict
assert_eq "a slow end names the last section" "startup" "$host_slow"

printf '%s\n' "startup 2.00" "fsync 2.90" "handoff 2.20" "end 2.40" >"$tmp/probes"
host_verdict
assert_eq "within 1.5x of the fastest: no section named" "" "$host_slow"
check "the line says every section was within" grep -q 'every section within 1.5x of the fastest' <<<"$host_line"
finish

#!/usr/bin/env bash
# What does dblock cost per job? Median wall time of 20 runs of `dblock run KEY -- true` on a
# throwaway SQLite file, next to `flock FILE true` measured in the same run, and, when
# DBLOCK_TEST_MYSQL_DSN / DBLOCK_TEST_POSTGRES_DSN are set (scripts/test-servers.sh prints
# them), `dblock -s S run KEY -- true` for every strategy on each server.
#   scripts/bench.sh [path-to-dblock]      default: build/dblock
# Uses hyperfine when installed, else (or with DBLOCK_BENCH_TOOL=loop) a bash loop timed
# with date +%s%N. DBLOCK_BENCH_RUNS changes the number of runs.
# Exits 1 if any measured command failed (its row says so); the other rows are still printed.
set -euo pipefail

runs=${DBLOCK_BENCH_RUNS:-20}
bin=${1:-build/dblock}
if [ ! -x "$bin" ]; then
  echo "bench.sh: no executable dblock at $bin (build it: ninja -C build dblock)" >&2
  exit 64
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
command -v flock >/dev/null || { echo "bench.sh: flock(1) not found (apt-get install util-linux)" >&2; exit 69; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dblock-bench.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
# The DSN travels in the environment, never on a command line: hyperfine echoes commands and
# ps shows them, and a server DSN may hold a password.
unset DBLOCK_DSN DBLOCK_DSN_FILE DBLOCK_CONFIG DBLOCK_STRATEGY DBLOCK_TABLE_PREFIX
export DBLOCK_CONFIG=/dev/null
export DBLOCK_TABLE_PREFIX=dblock_bench_

if [ "${DBLOCK_BENCH_TOOL:-}" != loop ] && command -v hyperfine >/dev/null; then tool=hyperfine; else tool="bash loop"; fi

rows=()
failures=0
flock_ms=""

# median_ms CMD...: prints the median wall time of $runs runs of CMD in milliseconds.
median_ms() {
  if [ "$tool" = hyperfine ]; then
    local quoted
    quoted=$(printf '%q ' "$@")
    hyperfine -N --runs "$runs" --warmup 2 --style none --export-json "$tmp/result.json" \
      -- "$quoted" >/dev/null 2>&1 || return 1
    python3 -c 'import json,sys; print("%.2f" % (json.load(open(sys.argv[1]))["results"][0]["median"] * 1000))' \
      "$tmp/result.json"
  else
    local i start end times=()
    "$@" >/dev/null 2>&1 || return 1  # warm-up
    for ((i = 0; i < runs; i++)); do
      start=$(date +%s%N)
      "$@" >/dev/null 2>&1 || return 1
      end=$(date +%s%N)
      times+=($((end - start)))
    done
    printf '%s\n' "${times[@]}" | sort -n |
      awk '{ t[NR] = $1 } END { m = (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2; printf "%.2f\n", m / 1e6 }'
  fi
}

# bench NAME CMD...: checks that CMD succeeds once, then measures it and adds a table row.
bench() {
  local name=$1 ms rc=0 err
  shift
  err=$("$@" 2>&1 >/dev/null) || rc=$?
  if [ "$rc" -ne 0 ]; then
    rows+=("$(printf '%-34s %12s   %s' "$name" "-" "failed: exit $rc: ${err%%$'\n'*}")")
    failures=$((failures + 1))
    return 0
  fi
  if ! ms=$(median_ms "$@"); then
    rows+=("$(printf '%-34s %12s   %s' "$name" "-" "failed during the measurement")")
    failures=$((failures + 1))
    return 0
  fi
  if [ -z "$flock_ms" ]; then
    flock_ms=$ms
    rows+=("$(printf '%-34s %12s   %s' "$name" "$ms" "1.0x")")
  else
    rows+=("$(printf '%-34s %12s   %s' "$name" "$ms" "$(awk -v a="$ms" -v b="$flock_ms" 'BEGIN { printf "%.1fx", (b > 0 ? a / b : 0) }')")")
  fi
}

echo "dblock benchmark: median of $runs runs each, measured with $tool" >&2

bench "flock FILE true" flock "$tmp/k" true
DBLOCK_DSN="sqlite:$tmp/bench.db" bench "dblock run k -- true (sqlite)" "$bin" run k -- true

for server in mysql postgres; do
  var=DBLOCK_TEST_${server^^}_DSN
  dsn=${!var:-}
  [ -n "$dsn" ] || continue
  for strategy in lease advisory for-update txn-insert; do
    DBLOCK_DSN=$dsn bench "dblock -s $strategy run ($server)" "$bin" -s "$strategy" run "bench-$strategy" -- true
  done
done

printf '%-34s %12s   %s\n' "command" "median (ms)" "vs flock"
printf '%s\n' "${rows[@]}"
if [ -z "${DBLOCK_TEST_MYSQL_DSN:-}${DBLOCK_TEST_POSTGRES_DSN:-}" ]; then
  echo "(set DBLOCK_TEST_MYSQL_DSN / DBLOCK_TEST_POSTGRES_DSN to measure the servers too)"
fi
[ "$failures" -eq 0 ]

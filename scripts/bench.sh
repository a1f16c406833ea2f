#!/usr/bin/env bash
# dblock's benchmark: one table of figures (each a median with min-max and n), a CSV of the same
# and a PNG chart of handoff latency, measuring the build under test side by side with its peers
# (flock(1), hand-written sqlite3/mariadb/psql lease scripts, `etcdctl lock`) in one run.
#   scripts/bench.sh [path-to-dblock]          default: build/dblock
# Sections (DBLOCK_BENCH_ONLY=startup,handoff,... picks some; default all, in this order):
#   startup     dblock --version and dblock run k -- true (SQLite) vs flock FILE true; peak RSS;
#               dblock's RssAnon at the command's start (goal <= 2 MiB)
#   fsync       fsync-class system calls per SQLite run (strace -f -c), steady state
#   servers     per strategy on MariaDB/PostgreSQL: statements, connections, transactions per
#               run (server counters), client sends (~round trips, strace), wall time; the
#               hand-written lease scripts alongside; a PostgreSQL lease run vs pg_floor (libpq
#               connect + one durable upsert + exec) vs etcdctl lock; a lease run's RssAnon at
#               the command's start (goal <= 2 MiB)
#   distance    the servers some milliseconds away (scripts/bench/delay_proxy.py on 127.0.0.1, at
#               each round trip of DBLOCK_BENCH_RTTS, default "0 2 10" ms): per server x strategy
#               dblock run k -- true against pg_floor/mysql_floor with and without a release and
#               etcdctl lock through the same proxy, and their ratios (goals at 10 ms: <= 1.25x
#               the floor with a release, <= 1.0x etcdctl lock); the handoff at
#               DBLOCK_BENCH_DISTANCE_HANDOFF_RTT (10) ms, every cell (goal <= 1 round trip + 5 ms)
#   handoff     holder's command ends -> waiter's command starts, every backend x strategy,
#               flock(1), etcdctl lock (a local etcd the bench starts on 127.0.0.1)
#   throughput  $DBLOCK_BENCH_WAITERS runs on one key: failures, handoffs/s once all wait, runs/s
#               started together; $DBLOCK_BENCH_TP_ROUNDS rounds
#   scale       run and history with 10^2 vs 10^6 rows in the tables; peak RSS
#   storm       $DBLOCK_BENCH_STORM runs released at once on one key without -w, per server x
#               lease/advisory, and the floor's storm (pg_floor/mysql_floor -r), in
#               $DBLOCK_BENCH_STORM_ROUNDS (3) interleaved rounds: the counts, the last exit, the
#               ratio to the floor (goal <= 1.2x); storm.png (exits over
#               time); on servers of its own with max_connections=40
#               (DBLOCK_BENCH_STORM_MAX_CONNECTIONS)
# Timed commands run interleaved (A B C A B C ...), so load changes hit every cell alike.
# The servers are measured when DBLOCK_TEST_MYSQL_DSN / DBLOCK_TEST_POSTGRES_DSN are set
# (scripts/test-servers.sh prints them); their counters are server-wide: use private servers.
# Knobs (defaults): DBLOCK_BENCH_RUNS (20) timed rounds, DBLOCK_BENCH_COUNT_RUNS (10) runs per
# statement count, DBLOCK_BENCH_HANDOFFS (10), DBLOCK_BENCH_WAITERS (100),
# DBLOCK_BENCH_TP_ROUNDS (3) throughput rounds, DBLOCK_BENCH_STORM (1000) contenders,
# DBLOCK_BENCH_STORM_JOB (30) the winner's command in s, DBLOCK_BENCH_STORM_NICE (19) the storm's
# contenders' niceness (the server keeps the CPU it would have on its own machine), DBLOCK_BENCH_SCALE_ROWS (1000000), DBLOCK_BENCH_STRACE_RUNS (5), DBLOCK_BENCH_RSS_RUNS (5),
# DBLOCK_BENCH_DISTANCE_RUNS (DBLOCK_BENCH_RUNS) timed rounds per distance,
# DBLOCK_BENCH_OUT (build/bench next to the binary): bench.txt, bench.csv, handoff.dat, handoff.png,
# storm.dat, storm.png.
# Exits 1 if any measurement failed (its row says FAILED); the other rows are still printed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-build/dblock}
if [ ! -x "$bin" ]; then
  echo "bench.sh: no executable dblock at $bin (build it: ninja -C build dblock)" >&2
  exit 64
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
for tool in flock python3 sqlite3; do
  command -v "$tool" >/dev/null || { echo "bench.sh: $tool not found (scripts/install-deps.sh)" >&2; exit 69; }
done
[ -x /usr/bin/time ] || { echo "bench.sh: GNU time not found (apt-get install time)" >&2; exit 69; }

runs=${DBLOCK_BENCH_RUNS:-20}
count_runs=${DBLOCK_BENCH_COUNT_RUNS:-10}
handoff_runs=${DBLOCK_BENCH_HANDOFFS:-10}
waiters=${DBLOCK_BENCH_WAITERS:-100}
tp_rounds=${DBLOCK_BENCH_TP_ROUNDS:-3}
scale_rows=${DBLOCK_BENCH_SCALE_ROWS:-1000000}
strace_runs=${DBLOCK_BENCH_STRACE_RUNS:-5}
rss_runs=${DBLOCK_BENCH_RSS_RUNS:-5}
storm_contenders=${DBLOCK_BENCH_STORM:-1000}
storm_job_s=${DBLOCK_BENCH_STORM_JOB:-30}  # PostgreSQL storms ran past 15 s at load ~460 (last refusal at 16.4 s): a late contender then ran after the winner, counted as a second run
storm_nice=${DBLOCK_BENCH_STORM_NICE:-19}
storm_max_connections=${DBLOCK_BENCH_STORM_MAX_CONNECTIONS:-40}
storm_rounds=${DBLOCK_BENCH_STORM_ROUNDS:-3}
out=${DBLOCK_BENCH_OUT:-$(dirname "$bin")/bench}
all_sections="startup fsync servers distance handoff throughput scale storm"
only=${DBLOCK_BENCH_ONLY:-$all_sections}
only=${only//,/ }
for s in $only; do
  [[ " $all_sections " == *" $s "* ]] || { echo "bench.sh: unknown section '$s' (sections: $all_sections)" >&2; exit 64; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out/handoff.dat" "$out/handoff.png" "$out/storm.dat" "$out/storm.png"  # a chart from an earlier run must not pass for this one's

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dblock-bench.XXXXXX")
results=$tmp/results.tsv
# Every section runs the binary as a package installs it: copied anew, its modules beside it
# (where it looks for them too). The linker's own output file runs a SQLite `dblock run` about
# 9% slower than a plain copy of it on this machine's kernel (farm-bench, 80 pairs; the same
# bytes: docs/performance.md, "The binary as installed"), which no operator's installed dblock pays.
built=$bin
mkdir "$tmp/installed"
for f in "$bin" "$(dirname "$bin")"/dblock-*.so; do
  [ -e "$f" ] && install -m 755 "$f" "$tmp/installed/"
done
bin=$tmp/installed/$(basename "$bin")
: >"$results"
# shellcheck source=scripts/bench/lib.sh
. "$here/bench/lib.sh"
# shellcheck source=scripts/bench/etcd.sh
. "$here/bench/etcd.sh"
# shellcheck source=scripts/bench/startup.sh
. "$here/bench/startup.sh"
# shellcheck source=scripts/bench/servers.sh
. "$here/bench/servers.sh"
# shellcheck source=scripts/bench/handoff.sh
. "$here/bench/handoff.sh"
# shellcheck source=scripts/bench/distance.sh
. "$here/bench/distance.sh"
# shellcheck source=scripts/bench/scale.sh
. "$here/bench/scale.sh"
# shellcheck source=scripts/bench/storm.sh
. "$here/bench/storm.sh"

cleanup() {
  stop_bg
  rm -rf -- "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# DSNs travel in the environment or in mode-600 files in $tmp, never on a command line
# (ps shows those) and never in the output.
mysql_dsn=${DBLOCK_TEST_MYSQL_DSN:-}
postgres_dsn=${DBLOCK_TEST_POSTGRES_DSN:-}
[ -z "$postgres_dsn" ] || postgres_dsn=$(plaintext_pg "$postgres_dsn")
unset DBLOCK_DSN DBLOCK_DSN_FILE DBLOCK_CONFIG DBLOCK_STRATEGY DBLOCK_TABLE_PREFIX DBLOCK_TEST_MYSQL_DSN \
  DBLOCK_TEST_POSTGRES_DSN PGHOST PGPORT PGUSER PGPASSWORD PGDATABASE PGSERVICE PGOPTIONS ETCDCTL_ENDPOINTS
export DBLOCK_CONFIG=/dev/null
export DBLOCK_TABLE_PREFIX=dblock_bench_

mysql_client=$(command -v mariadb || command -v mysql || true)
if [ -n "$mysql_dsn" ] && [ -z "$mysql_client" ]; then
  fail_row mysql "all" "no mariadb/mysql client (apt-get install mariadb-client)"
  mysql_dsn=""
elif [ -n "$mysql_dsn" ]; then
  split_dsn mysql "$mysql_dsn" "$tmp/my.cnf"
fi
if [ -n "$postgres_dsn" ] && ! command -v psql >/dev/null; then
  fail_row postgres "all" "no psql (apt-get install postgresql-client)"
  postgres_dsn=""
elif [ -n "$postgres_dsn" ]; then
  split_dsn postgres "$postgres_dsn" "$tmp/pg.env"
  # shellcheck disable=SC1091
  . "$tmp/pg.env"  # PG* for psql and psql_lease.sh
  if pg "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null 2>"$tmp/err"; then
    pg "SELECT pg_stat_statements_reset()" >/dev/null
  else
    fail_row postgres "pg_stat_statements" "$(head -n 1 "$tmp/err") (statement counts will fail)"
  fi
fi

for b in mysql postgres; do
  [ -n "$(dsn_of "$b")" ] || continue
  drop_tables "$b" "$DBLOCK_TABLE_PREFIX" >/dev/null 2>"$tmp/err" || fail_row "$b" "drop the bench's tables" "$(head -n 1 "$tmp/err")"
done

# The peers' versions, named in the output next to the machine.
versions() {
  local v
  printf 'dblock: %s' "$("$bin" --version 2>&1 | head -n 1)"
  # The commit of the checkout the binary sits in (build/dblock), when it sits in one.
  if v=$(git -C "$(dirname "$built")" rev-parse --short HEAD 2>/dev/null); then
    git -C "$(dirname "$built")" diff --quiet HEAD 2>/dev/null || v="$v+changes"
    printf ' (checkout at %s)' "$v"
  fi
  printf '; %s' "$(flock --version 2>&1 | head -n 1)"
  printf '; sqlite3 %s' "$(sqlite3 --version | cut -d' ' -f1)"
  if [ -n "$mysql_dsn" ]; then v=$(my "SELECT VERSION()" 2>/dev/null || echo "?"); printf '; MariaDB/MySQL server %s' "$v"; fi
  if [ -n "$postgres_dsn" ]; then v=$(pg "SHOW server_version" 2>/dev/null || echo "?"); printf '; PostgreSQL server %s' "$v"; fi
  if [ -n "${etcd_endpoint:-}" ]; then printf '; %s' "$(etcd --version | head -n 1)"; fi
  if command -v strace >/dev/null; then printf '; %s' "$(strace -V | head -n 1)"; fi
  case " $only " in
    *" distance "*)  # the floors' client libraries and the delay proxy's interpreter
      if command -v pg_config >/dev/null; then printf '; libpq %s' "$(pg_config --version | cut -d' ' -f2)"; fi
      if command -v mariadb_config >/dev/null; then printf '; MariaDB Connector/C %s' "$(mariadb_config --cc_version 2>/dev/null || mariadb_config --version)"; fi
      printf '; %s' "$(python3 --version 2>&1)"
      ;;
  esac
  echo
}

case " $only " in *" servers "* | *" distance "* | *" handoff "* | *" throughput "*) etcd_start ;; esac
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
t_start=$SECONDS
say "sections: $only; output in $out"
: >"$tmp/probes"
for s in $only; do
  host_probe "$s"
  "section_$s"
done
host_probe end
host_verdict

# ------------------------------------------------------------------ output
# The table: one line per figure; median and min-max in the figure's unit.
{
  echo "dblock bench, finished $(date -u '+%Y-%m-%d %H:%M UTC'): $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), kernel $(uname -r)"
  echo "load average $load_start at start, $(cut -d' ' -f1-3 /proc/loadavg) at end; $((SECONDS - t_start)) s"
  echo "versions: $(versions)"
  echo "$host_line"
  echo "N: $runs timed rounds (interleaved), $count_runs runs per count, $handoff_runs handoffs, $waiters waiters x $tp_rounds throughput rounds, $scale_rows rows, $storm_contenders storm contenders"
  echo
  awk -F'\t' '
    BEGIN { printf "%-10s %-52s %10s %-19s %-5s %3s  %s\n", "section", "measurement", "median", "min-max", "unit", "n", "note" }
    function n(v) { if ($3 !~ /^(ms|x|s|1\/s)$/) sub(/\.00$/, "", v); return v }  # counts and KiB: whole
    { $4 = n($4); $5 = n($5); $6 = n($6); range = ($5 == "" ? "" : $5 "-" $6)
      printf "%-10s %-52s %10s %-19s %-5s %3s  %s\n", $1, $2, $4, range, $3, $7, $8 }' "$results"
  [ -n "$mysql_dsn$postgres_dsn" ] || echo "(set DBLOCK_TEST_MYSQL_DSN / DBLOCK_TEST_POSTGRES_DSN to measure the servers too)"
} >"$out/bench.txt"
# The CSV: the same rows, then the machine and versions as "machine" rows (value in the note).
{
  cat "$results"
  printf 'machine\tcores\t\t%s\t\t\t\t%s\n' "$(nproc)" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  printf 'machine\tkernel\t\t\t\t\t\t%s\n' "$(uname -r)"
  printf 'machine\tload average at start, at end\t\t\t\t\t\t%s\n' "$load_start; $(cut -d' ' -f1-3 /proc/loadavg)"
  printf 'machine\tversions\t\t\t\t\t\t%s\n' "$(versions)"
  printf 'machine\thost speed\t\t\t\t\t\t%s\n' "$host_line"
} | awk -F'\t' 'BEGIN { OFS = ","; print "section,measurement,unit,median,min,max,n,note" }
  function q(s) { gsub(/"/, "\"\"", s); return "\"" s "\"" }
  { print q($1), q($2), q($3), $4, $5, $6, $7, q($8) }' >"$out/bench.csv"
# chart NAME SUBTITLE: $out/NAME.png from $out/NAME.dat with scripts/bench/NAME.gp, when the data exists.
chart() {
  [ -s "$out/$1.dat" ] || return 0
  if ! command -v gnuplot >/dev/null; then
    echo "(no gnuplot: no $1 chart; apt-get install gnuplot-nox)" >>"$out/bench.txt"
    failures=$((failures + 1))
  elif ! gnuplot -e "datafile='$out/$1.dat'; outfile='$out/$1.png'; subtitle='$2'" "$here/bench/$1.gp" 2>"$tmp/err.gp"; then
    echo "($1 chart FAILED: $(head -n 1 "$tmp/err.gp"))" >>"$out/bench.txt"
    failures=$((failures + 1))
  fi
}
chart handoff "$(nproc) cores, median and min-max of $handoff_runs, $("$bin" --version 2>&1 | head -n 1)"
chart storm "$(nproc) cores, $storm_contenders contenders, $("$bin" --version 2>&1 | head -n 1)"
cat "$out/bench.txt"
say "wrote $out/bench.txt, bench.csv$([ ! -s "$out/handoff.png" ] || echo ", handoff.png")$([ ! -s "$out/storm.png" ] || echo ", storm.png")"
[ -z "$host_slow" ] || say "the host ran over 1.5x slower than its fastest around: $host_slow (rerun: DBLOCK_BENCH_ONLY=${host_slow// /,})"
[ "$failures" -eq 0 ]

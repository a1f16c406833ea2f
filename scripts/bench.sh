#!/usr/bin/env bash
# The figures the closing notes of the SQLite, MySQL/MariaDB and PostgreSQL issues ask for, in
# one run, as one plain table on stdout (progress on stderr):
#   sqlite    median wall time of `dblock run k -- true` and of `flock FILE true`
#   mysql     statements per `dblock -s S run k -- true` for each strategy (GLOBAL STATUS
#             Questions and Com_* deltas around N runs, minus the probe's own, divided by N);
#             median wall time of each strategy and of scripts/bench/mysql_lease.sh
#   postgres  statements per run for each strategy (pg_stat_statements calls, same method);
#             handoff time (holder's command ends -> waiter's command starts), median of N,
#             per strategy; median wall time of each strategy and of scripts/bench/psql_lease.sh
# The server parts run when DBLOCK_TEST_MYSQL_DSN / DBLOCK_TEST_POSTGRES_DSN are set
# (scripts/test-servers.sh prints them). Statement counts assume an otherwise idle server
# (GLOBAL counters, whole-server pg_stat_statements): use a private one.
#   scripts/bench.sh [path-to-dblock]      default: build/dblock
# DBLOCK_BENCH_RUNS (default 20) is N everywhere. Timing uses hyperfine when installed, else (or
# with DBLOCK_BENCH_TOOL=loop) a bash loop timed with date +%s%N.
# Exits 1 if any measurement failed (its row says so); the other rows are still printed.
set -euo pipefail

runs=${DBLOCK_BENCH_RUNS:-20}
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-build/dblock}
if [ ! -x "$bin" ]; then
  echo "bench.sh: no executable dblock at $bin (build it: ninja -C build dblock)" >&2
  exit 64
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
command -v flock >/dev/null || { echo "bench.sh: flock(1) not found (apt-get install util-linux)" >&2; exit 69; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dblock-bench.XXXXXX")
bg_pids=()
cleanup() {
  local p
  for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf -- "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# DSNs travel in the environment or in mode-600 files in $tmp, never on a command line
# (hyperfine and ps show command lines) and never in the output.
mysql_dsn=${DBLOCK_TEST_MYSQL_DSN:-}
postgres_dsn=${DBLOCK_TEST_POSTGRES_DSN:-}
unset DBLOCK_DSN DBLOCK_DSN_FILE DBLOCK_CONFIG DBLOCK_STRATEGY DBLOCK_TABLE_PREFIX DBLOCK_TEST_MYSQL_DSN \
  DBLOCK_TEST_POSTGRES_DSN PGHOST PGPORT PGUSER PGPASSWORD PGDATABASE PGSERVICE PGOPTIONS
export DBLOCK_CONFIG=/dev/null
export DBLOCK_TABLE_PREFIX=dblock_bench_
export LEASE_TABLE=dblock_bench_locks  # the hand-written scripts use dblock's own table
strategies=(lease advisory for-update txn-insert)

if [ "${DBLOCK_BENCH_TOOL:-}" != loop ] && command -v hyperfine >/dev/null; then tool=hyperfine; else tool="bash loop"; fi
say() { echo "bench: $*" >&2; }

rows=()
failures=0
# row SECTION MEASUREMENT VALUE UNIT [NOTE]
row() { rows+=("$(printf '%-9s %-44s %10s %-6s %s' "$1" "$2" "$3" "$4" "${5:-}")"); }
fail_row() { row "$1" "$2" "-" "" "FAILED: $3"; failures=$((failures + 1)); }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1fx", (b > 0 ? a / b : 0) }'; }
median() {  # median of the numbers on stdin
  sort -n | awk '{ t[NR] = $1 } END { if (NR == 0) exit 1; printf "%.2f\n", (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2 }'
}

# median_ms CMD...: median wall time of $runs runs of CMD, in milliseconds.
median_ms() {
  if [ "$tool" = hyperfine ]; then
    hyperfine -N --runs "$runs" --warmup 2 --style none --export-json "$tmp/result.json" \
      -- "$(printf '%q ' "$@")" >/dev/null 2>&1 || return 1
    python3 -c 'import json,sys; print("%.2f" % (json.load(open(sys.argv[1]))["results"][0]["median"] * 1000))' \
      "$tmp/result.json"
  else
    local i start end
    "$@" >/dev/null 2>&1 || return 1  # warm-up
    for ((i = 0; i < runs; i++)); do
      start=$(date +%s%N)
      "$@" >/dev/null 2>&1 || return 1
      end=$(date +%s%N)
      echo $((end - start))
    done | median | awk '{ printf "%.2f\n", $1 / 1e6 }'
  fi
}

# timed VAR SECTION NAME CMD...: checks CMD succeeds once, measures it, stores the median in VAR
# (empty on failure) and adds a row; the note is filled in later by the caller via $note.
timed() {
  local var=$1 section=$2 name=$3 ms rc=0 err
  shift 3
  printf -v "$var" '%s' ""
  err=$("$@" 2>&1 >/dev/null) || rc=$?
  if [ "$rc" -ne 0 ]; then
    fail_row "$section" "$name" "exit $rc: ${err%%$'\n'*}"
    return 0
  fi
  if ! ms=$(median_ms "$@"); then
    fail_row "$section" "$name" "failed during the measurement"
    return 0
  fi
  printf -v "$var" '%s' "$ms"
  row "$section" "$name" "$ms" ms "${note:-}"
}

say "median of $runs runs each, timed with $tool"
load_start=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")

# ---------------------------------------------------------------- SQLite
note=""
timed flock_ms sqlite "flock FILE true" flock "$tmp/k" true
note=${flock_ms:+"vs flock: "}
sqlite_ms=""
DBLOCK_DSN="sqlite:$tmp/bench.db" timed sqlite_ms sqlite "dblock run k -- true" "$bin" run k -- true
if [ -n "$flock_ms" ] && [ -n "$sqlite_ms" ]; then
  rows[-1]="${rows[-1]}$(ratio "$sqlite_ms" "$flock_ms")"
fi

# ---------------------------------------------------------------- helpers for the servers
# Splits a server DSN into a client option file (MySQL) or a libpq environment file
# (PostgreSQL), both mode 600 in $tmp; the password is percent-decoded, never printed.
split_dsn() {  # split_dsn mysql|postgres DSN OUTFILE
  DSN=$2 python3 - "$1" "$3" <<'PY'
import os, shlex, sys
from urllib.parse import urlsplit, unquote
kind, out = sys.argv[1], sys.argv[2]
u = urlsplit(os.environ["DSN"])
parts = {"host": u.hostname or "127.0.0.1", "port": str(u.port or (3306 if kind == "mysql" else 5432)),
         "user": unquote(u.username or ""), "password": unquote(u.password or ""),
         "database": unquote(u.path.lstrip("/"))}
fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
with os.fdopen(fd, "w") as f:
    if kind == "mysql":
        esc = lambda v: '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        f.write("[client]\n" + "".join(f"{k}={esc(v)}\n" for k, v in parts.items() if v))
    else:
        names = {"host": "PGHOST", "port": "PGPORT", "user": "PGUSER", "password": "PGPASSWORD",
                 "database": "PGDATABASE"}
        f.write("".join(f"export {names[k]}={shlex.quote(v)}\n" for k, v in parts.items() if v))
PY
}

# counted SECTION STRATEGY SNAPSHOT_FN LABEL: statements per `dblock -s STRATEGY run k -- true`.
# SNAPSHOT_FN prints "name value" lines; the first line is the headline counter. The probe's
# own statements are measured with no runs in between and subtracted.
counted() {
  local section=$1 strategy=$2 snap=$3 i key="count-$2"
  if ! "$bin" -s "$strategy" run "$key" -- true >/dev/null 2>"$tmp/err"; then  # warm-up: tables, claim rows
    fail_row "$section" "statements/run, $strategy" "$(head -n 1 "$tmp/err")"
    return 0
  fi
  if ! { "$snap" >"$tmp/p0" && "$snap" >"$tmp/p1" && "$snap" >"$tmp/c0"; }; then
    fail_row "$section" "statements/run, $strategy" "probe failed"
    return 0
  fi
  for ((i = 0; i < runs; i++)); do
    "$bin" -s "$strategy" run "$key" -- true >/dev/null 2>"$tmp/err" ||
      { fail_row "$section" "statements/run, $strategy" "run failed: $(head -n 1 "$tmp/err")"; return 0; }
  done
  "$snap" >"$tmp/c1" || { fail_row "$section" "statements/run, $strategy" "probe failed"; return 0; }
  # per run = ((c1 - c0) - (p1 - p0)) / runs; the note lists the non-zero breakdown counters.
  awk -v n="$runs" -v section="$section" -v strategy="$strategy" -v label="$4" '
    FILENAME == ARGV[1] { p0[$1] = $2; next }
    FILENAME == ARGV[2] { p1[$1] = $2; next }
    FILENAME == ARGV[3] { c0[$1] = $2; next }
    { if (FNR == 1) head = $1
      d[$1] = (($2 - c0[$1]) - (p1[$1] - p0[$1])) / n; order[FNR] = $1; count = FNR }
    END {
      note = ""
      for (i = 2; i <= count; i++) { k = order[i]; if (d[k] > 0.005 || d[k] < -0.005) note = note sprintf(" %s=%g", k, d[k]) }
      printf "%-9s %-44s %10.2f %-6s %s; per run:%s\n", section, "statements/run, " strategy, d[head], "stmts", label, note
    }' "$tmp/p0" "$tmp/p1" "$tmp/c0" "$tmp/c1" >"$tmp/row"
  rows+=("$(cat "$tmp/row")")
}

# ---------------------------------------------------------------- MySQL / MariaDB
mysql_client=$(command -v mariadb || command -v mysql || true)
if [ -n "$mysql_dsn" ] && [ -z "$mysql_client" ]; then
  fail_row mysql "all" "no mariadb/mysql client (apt-get install mariadb-client)"
elif [ -n "$mysql_dsn" ]; then
  say "mysql"
  split_dsn mysql "$mysql_dsn" "$tmp/my.cnf"
  export MYSQL_LEASE_CNF=$tmp/my.cnf
  my_snapshot() {
    "$mysql_client" --defaults-extra-file="$tmp/my.cnf" -N -B -e \
      "SHOW GLOBAL STATUS WHERE Variable_name = 'Questions' OR (Variable_name LIKE 'Com\_%' AND Variable_name <> 'Com_show_status')" |
      awk '$1 == "Questions" { print; next } { sub(/^Com_/, "", $1); rest[++n] = $0 } END { for (i = 1; i <= n; i++) print rest[i] }'
  }
  export DBLOCK_DSN=$mysql_dsn
  for s in "${strategies[@]}"; do counted mysql "$s" my_snapshot "Questions; Com_*"; done
  note=""
  for s in "${strategies[@]}"; do
    timed "my_ms_${s//-/_}" mysql "dblock -s $s run k -- true" "$bin" -s "$s" run "wall-$s" -- true
  done
  note=${my_ms_lease:+"vs dblock lease: "}
  timed my_sh_ms mysql "scripts/bench/mysql_lease.sh k 60 -- true" "$here/bench/mysql_lease.sh" wall-sh 60 -- true
  if [ -n "$my_ms_lease" ] && [ -n "$my_sh_ms" ]; then rows[-1]="${rows[-1]}$(ratio "$my_sh_ms" "$my_ms_lease")"; fi
  unset DBLOCK_DSN
fi

# ---------------------------------------------------------------- PostgreSQL
# handoff STRATEGY: writes the median of $runs handoffs in ms to $tmp/handoff.ms, or fails.
# The holder's command marks that it holds the lock, waits (at most 10 s) until the waiter
# provably waits (its -v line says the key is held, or the server shows a session waiting on a
# lock: for-update and txn-insert block in the server silently), sleeps 0.3 s more and writes
# its end time; the waiter's command writes its start time. handoff = waiter start - holder
# end: the holder's release, the wake-up and the waiter's fork/exec. Without that wait a
# waiter slow to start on a loaded machine would measure its own start-up, not the handoff.
cat >"$tmp/holder.sh" <<'SH'
: >"$1/held"
i=0
until grep -q " is held" "$1/err.w" 2>/dev/null ||
  [ "$(psql -X -A -t -c "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'" 2>/dev/null || echo 0)" -gt 0 ]; do
  i=$((i + 1))
  [ "$i" -le 500 ] || { echo "the waiter never waited" >&2; exit 9; }
  sleep 0.02
done
sleep 0.3
date +%s%N >"$1/t1"
SH
handoff() {
  local strategy=$1 i d key="handoff-$1" deadline hp wp t1 t2
  for ((i = 0; i < runs; i++)); do
    rm -f "$tmp/held" "$tmp/t1" "$tmp/t2" "$tmp/err.w"
    "$bin" -s "$strategy" run "$key" -- sh "$tmp/holder.sh" "$tmp" >/dev/null 2>"$tmp/err.h" &
    hp=$!
    bg_pids=("$hp")
    deadline=$((SECONDS + 10))
    until [ -e "$tmp/held" ]; do
      if [ $SECONDS -ge "$deadline" ] || ! kill -0 "$hp" 2>/dev/null; then
        wait "$hp" || true
        echo "holder never ran: $(head -n 1 "$tmp/err.h")" >&2
        return 1
      fi
      sleep 0.01
    done
    "$bin" -s "$strategy" -v run "$key" -w 10 -- sh -c 'date +%s%N >"$1/t2"' sh "$tmp" >/dev/null 2>"$tmp/err.w" &
    wp=$!
    bg_pids=("$hp" "$wp")
    wait "$hp" || { echo "holder failed: $(tail -n 1 "$tmp/err.h")" >&2; return 1; }
    wait "$wp" || { echo "waiter failed: $(grep -v '^dblock: database' "$tmp/err.w" | tail -n 1)" >&2; return 1; }
    bg_pids=()
    if [ ! -s "$tmp/t1" ] || [ ! -s "$tmp/t2" ]; then echo "a command did not run" >&2; return 1; fi
    t1=$(cat "$tmp/t1") t2=$(cat "$tmp/t2")
    d=$((t2 - t1))
    [ "$d" -gt 0 ] || { echo "waiter started before the holder ended ($d ns): overlap" >&2; return 1; }
    echo "$d"
  done >"$tmp/handoffs"
  median <"$tmp/handoffs" | awk '{ printf "%.2f\n", $1 / 1e6 }' >"$tmp/handoff.ms"
}

if [ -n "$postgres_dsn" ] && ! command -v psql >/dev/null; then
  fail_row postgres "all" "no psql (apt-get install postgresql-client)"
elif [ -n "$postgres_dsn" ]; then
  say "postgres"
  split_dsn postgres "$postgres_dsn" "$tmp/pg.env"
  # shellcheck disable=SC1091
  . "$tmp/pg.env"  # PG* for psql and psql_lease.sh
  pg() { psql -X -q -A -t -F ' ' -v ON_ERROR_STOP=1 -c "$1"; }
  pg_snapshot() {
    # Cumulative calls in this database (the probe's own included, which counted()
    # subtracts). Rows: the total, then per first keyword of the statement.
    pg "WITH s AS (SELECT lower(substring(ltrim(query) FROM '^[A-Za-z]+')) AS kind, calls FROM pg_stat_statements
                  WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()))
        SELECT 'calls', coalesce(sum(calls), 0) FROM s
        UNION ALL (SELECT coalesce(kind, '?'), sum(calls) FROM s GROUP BY kind ORDER BY kind)" | sort -k1,1 -s |
      awk '$1 == "calls" { print; next } { rest[++n] = $0 } END { for (i = 1; i <= n; i++) print rest[i] }'
  }
  if pg "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null 2>"$tmp/err"; then
    # Cumulative counters, like MySQL's: read without resetting (reset once here).
    pg "SELECT pg_stat_statements_reset()" >/dev/null
    export DBLOCK_DSN=$postgres_dsn
    for s in "${strategies[@]}"; do counted postgres "$s" pg_snapshot "pg_stat_statements calls; by first keyword"; done
  else
    fail_row postgres "statements/run" "pg_stat_statements: $(head -n 1 "$tmp/err")"
    export DBLOCK_DSN=$postgres_dsn
  fi
  for s in "${strategies[@]}"; do
    say "postgres handoff, $s"
    if handoff "$s" 2>"$tmp/err"; then
      bg_pids=()
      row postgres "handoff release->next start, $s" "$(cat "$tmp/handoff.ms")" ms "median of $runs"
    else
      for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
      bg_pids=()
      fail_row postgres "handoff release->next start, $s" "$(tail -n 1 "$tmp/err")"
    fi
  done
  note=""
  for s in "${strategies[@]}"; do
    timed "pg_ms_${s//-/_}" postgres "dblock -s $s run k -- true" "$bin" -s "$s" run "wall-$s" -- true
  done
  note=${pg_ms_lease:+"vs dblock lease: "}
  timed pg_sh_ms postgres "scripts/bench/psql_lease.sh k 60 -- true" "$here/bench/psql_lease.sh" wall-sh 60 -- true
  if [ -n "$pg_ms_lease" ] && [ -n "$pg_sh_ms" ]; then rows[-1]="${rows[-1]}$(ratio "$pg_sh_ms" "$pg_ms_lease")"; fi
  unset DBLOCK_DSN
fi

# Timings on a shared machine are only as good as its idle time: say how busy it was.
echo "dblock bench: $(nproc) cores, load average $load_start at start, $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?") at end; N = $runs; timing: $tool"
printf '%-9s %-44s %10s %-6s %s\n' "backend" "measurement" "value" "unit" "note"
printf '%s\n' "${rows[@]}"
if [ -z "$mysql_dsn$postgres_dsn" ]; then
  echo "(set DBLOCK_TEST_MYSQL_DSN / DBLOCK_TEST_POSTGRES_DSN to measure the servers too)"
fi
[ "$failures" -eq 0 ]

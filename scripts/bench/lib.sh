# shellcheck shell=bash
# Shared by scripts/bench.sh and its sections: result rows, statistics, interleaved timing,
# background processes, server client set-up. Sourced, never run.

say() { echo "bench: $*" >&2; }

# ------------------------------------------------------------------ the host's own speed
# host_probe WHEN: the machine's speed, measured the same way before each section and at the end:
# 15 runs of `flock FILE true` (a fork, an exec and a lock: no database, no dblock), their median
# in ms a line of $tmp/probes ("WHEN MEDIAN"). A shared host slowed three-fold for three minutes
# in one bench (flock's own handoff 5.32 ms there, 2.01 in a rerun: docs/performance.md, "A full
# bench of 236d9c1"), and only flock's row in one section showed it; host_verdict names the
# sections such a window spoiled.
host_probe() {
  local i t0 t1
  : >"$tmp/probe.one"
  for ((i = 0; i < 15; i++)); do
    t0=${EPOCHREALTIME/./}
    flock "$tmp/probe.lock" true
    t1=${EPOCHREALTIME/./}
    echo $((t1 - t0)) >>"$tmp/probe.one"
  done
  echo "$1 $(sort -n "$tmp/probe.one" | awk '{ t[NR] = $1 } END { printf "%.2f", t[8] / 1000 }')" >>"$tmp/probes"
}

# host_verdict: sets host_line, one line on the probes against the fastest of them, and
# host_slow, the sections whose probe before or after them ran over 1.5x the fastest: their timed
# rows are the host's, not dblock's (rerun one alone: DBLOCK_BENCH_ONLY=SECTION).
host_verdict() {
  host_slow=$(awk '{ w[NR] = $1; m[NR] = $2; if (NR == 1 || $2 < best) best = $2 }
    END { for (i = 1; i < NR; i++) if (m[i] > 1.5 * best || m[i + 1] > 1.5 * best) printf "%s ", w[i] }' "$tmp/probes")
  host_slow=${host_slow% }
  host_line=$(awk -v slow="$host_slow" '{ line = line sprintf("%s%s %s", NR > 1 ? ", " : "", $1, $2) }
    END { printf "host speed (median of 15 flock FILE true, ms, before each section): %s; %s\n", line,
      slow == "" ? "every section within 1.5x of the fastest" : "SLOW HOST WINDOW in " slow ": rerun those sections" }' "$tmp/probes")
}

# ------------------------------------------------------------------ result rows
# Every figure is one line of $results (tab-separated):
#   section  measurement  unit  median  min  max  n  note
# A failed measurement has median "FAILED" and the reason in its note; it makes the run exit 1.
failures=0
result() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$results"; }
fail_row() {  # fail_row SECTION MEASUREMENT REASON
  local reason=${3//$'\t'/ }
  result "$1" "$2" "" FAILED "" "" "" "${reason%%$'\n'*}"
  failures=$((failures + 1))
  say "FAILED: $1 / $2: ${reason%%$'\n'*}"
}

# stats FILE: "median min max n" of the numbers in FILE (one a line), two decimals; fails if empty.
stats() {
  sort -g "$1" | awk '{ t[NR] = $1 } END {
    if (NR == 0) exit 1
    m = (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
    printf "%.2f %.2f %.2f %d\n", m, t[1], t[NR], NR }'
}

# goal_note VALUE OP GOAL UNIT: "goal OP GOAL UNIT: met" or "... NOT met" (OP is <= or >=).
goal_note() {
  echo "goal $2 $3$4: $(awk -v v="$1" -v op="$2" -v g="$3" 'BEGIN { print ((op == "<=" ? v <= g : v >= g) ? "met" : "NOT met") }')"
}

# stat_row SECTION MEASUREMENT UNIT FILE [NOTE] [OP GOAL]: one row from the samples in FILE;
# with OP and GOAL, the note also says whether the median meets the goal (goal_note).
stat_row() {
  local s
  if s=$(stats "$4"); then
    read -r med lo hi n <<<"$s"
    local note=${5:-}
    [ -z "${7:-}" ] || note="${note:+$note; }$(goal_note "$med" "$6" "$7" " $3")"
    result "$1" "$2" "$3" "$med" "$lo" "$hi" "$n" "$note"
  else
    fail_row "$1" "$2" "no samples"
  fi
}

# median_of SECTION MEASUREMENT: the median already recorded for that row (empty if none/failed).
median_of() {
  awk -F'\t' -v s="$1" -v m="$2" '$1 == s && $2 == m && $4 != "FAILED" { v = $4 } END { print v }' "$results"
}

# ratio_row SECTION MEASUREMENT A_MEASUREMENT B_MEASUREMENT [GOAL]: median(A) / median(B).
# With GOAL (e.g. 1.2), the note says whether the ratio meets it; missing goals are not failures.
ratio_row() {
  local a b r note=""
  a=$(median_of "$1" "$3") b=$(median_of "$1" "$4")
  if [ -z "$a" ] || [ -z "$b" ]; then
    fail_row "$1" "$2" "an operand failed"
    return 0
  fi
  r=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
  if [ -n "${5:-}" ]; then
    note="goal <= ${5}x: $(awk -v r="$r" -v g="$5" 'BEGIN { print (r <= g ? "met" : "NOT met") }')"
  fi
  result "$1" "$2" x "$r" "" "" "" "$note"
}

# ------------------------------------------------------------------ interleaved timing
# cell NAME COMMAND-STRING: registers a command for the next `interleave`. The string is run
# with eval (build it with printf %q); stdout and stderr are discarded.
cell_names=()
cell_cmds=()
cell() { cell_names+=("$1"); cell_cmds+=("$2"); }

# interleave SECTION RUNS [UNIT-NOTE]: one warm-up of every cell, then RUNS rounds of one run of
# each cell in turn (A B C A B C ...), so a change in the machine's load hits every cell alike.
# Wall time per run in ms from bash's $EPOCHREALTIME (no fork for the clock). One row per cell;
# a cell whose command fails is dropped from later rounds and its row says FAILED.
interleave() {
  local section=$1 runs=$2 i c t0 t1 rc
  local -a dead=()
  for c in "${!cell_names[@]}"; do
    : >"$tmp/samples.$c"
    rc=0
    eval "${cell_cmds[$c]}" >/dev/null 2>"$tmp/err.cell" || rc=$?
    if [ "$rc" -ne 0 ]; then
      dead[c]="exit $rc: $(grep -v '^$' "$tmp/err.cell" | head -n 1)"
    fi
  done
  for ((i = 0; i < runs; i++)); do
    for c in "${!cell_names[@]}"; do
      [ -z "${dead[c]:-}" ] || continue
      rc=0
      t0=${EPOCHREALTIME/./}
      eval "${cell_cmds[$c]}" >/dev/null 2>"$tmp/err.cell" || rc=$?
      t1=${EPOCHREALTIME/./}
      if [ "$rc" -ne 0 ]; then
        dead[c]="run $((i + 1)): exit $rc: $(grep -v '^$' "$tmp/err.cell" | head -n 1)"
        continue
      fi
      echo "$(((t1 - t0) / 1000)).$(printf '%03d' $(((t1 - t0) % 1000)))" >>"$tmp/samples.$c"
    done
  done
  for c in "${!cell_names[@]}"; do
    if [ -n "${dead[c]:-}" ]; then
      fail_row "$section" "${cell_names[$c]}" "${dead[c]}"
    else
      stat_row "$section" "${cell_names[$c]}" ms "$tmp/samples.$c" "${3:-}"
    fi
  done
  cell_names=()
  cell_cmds=()
}

# peak_rss SECTION MEASUREMENT RUNS COMMAND-STRING: peak resident set (GNU time %M, KiB) of RUNS
# runs. env(1) runs the string, so its leading VAR=value assignments still apply; env execs the
# command in the same process, whose peak is the one measured.
peak_rss() {
  local i rc
  : >"$tmp/rss"
  for ((i = 0; i < $3; i++)); do
    rc=0
    eval "/usr/bin/time -f %M -o $(printf %q "$tmp/rss.one") env $4" >/dev/null 2>"$tmp/err.rss" || rc=$?
    if [ "$rc" -ne 0 ]; then
      fail_row "$1" "$2" "exit $rc: $(head -n 1 "$tmp/err.rss")"
      return 0
    fi
    tail -n 1 "$tmp/rss.one" >>"$tmp/rss"
  done
  stat_row "$1" "$2" KiB "$tmp/rss" "GNU time %M"
}

# rss_anon SECTION MEASUREMENT RUNS DBLOCK-RUN-PREFIX: the anonymous resident memory (RssAnon,
# KiB) of the dblock process at its command's start, median of RUNS runs; goal <= 2 MiB. The
# prefix is a `dbl ... run KEY` string; the job, a shell under dblock's guard, reads the status
# of its parent's parent (the guard's PPid): dblock itself.
rss_anon_goal_kib=2048
rss_anon() {
  local i rc job v
  # shellcheck disable=SC2016  # expanded by the job's shell, not here
  job='d=$(awk '"'"'$1 == "PPid:" { print $2 }'"'"' /proc/$PPID/status) && awk '"'"'$1 == "RssAnon:" { print $2 }'"'"' /proc/$d/status'
  : >"$tmp/rss_anon"
  for ((i = 0; i < $3; i++)); do
    rc=0
    v=$(eval "$4 -c $(printf %q "$job")" 2>"$tmp/err.rss") || rc=$?
    if [ "$rc" -ne 0 ] || [ -z "$v" ]; then
      fail_row "$1" "$2" "exit $rc: $(head -n 1 "$tmp/err.rss")"
      return 0
    fi
    echo "$v" >>"$tmp/rss_anon"
  done
  local s
  s=$(stats "$tmp/rss_anon") || { fail_row "$1" "$2" "no samples"; return 0; }
  read -r med lo hi n <<<"$s"
  result "$1" "$2" KiB "$med" "$lo" "$hi" "$n" \
    "RssAnon at the command's start; goal <= $rss_anon_goal_kib KiB: $(awk -v m="$med" -v g="$rss_anon_goal_kib" 'BEGIN { print (m <= g ? "met" : "NOT met") }')"
}

# syscalls_per_run SECTION SYSCALLS MEASUREMENT COMMAND-STRING: how many of the comma-separated
# SYSCALLS one run of the command and its children makes (strace -f -c), median of
# $strace_runs runs; the note breaks the last run down per system call.
syscalls_per_run() {
  local i rc by
  : >"$tmp/calls"
  for ((i = 0; i < strace_runs; i++)); do
    rc=0
    eval "strace -f -c -o $(printf %q "$tmp/strace.out") -e trace=$2 env $4" >/dev/null 2>"$tmp/err.strace" || rc=$?
    if [ "$rc" -ne 0 ]; then
      fail_row "$1" "$3" "exit $rc: $(head -n 1 "$tmp/err.strace")"
      return 0
    fi
    # Rows: % time, seconds, usecs/call, calls, [errors,] syscall; the syscall is the last field.
    awk -v want=",$2," 'index(want, "," $NF ",") && $NF != "total" { n += $4; by[$NF] += $4 }
         END { printf "%d", n; for (s in by) printf " %s=%d", s, by[s]; print "" }' "$tmp/strace.out" >>"$tmp/calls"
  done
  cut -d' ' -f1 "$tmp/calls" >"$tmp/calls.n"
  by=$(tail -n 1 "$tmp/calls" | cut -s -d' ' -f2-)
  stat_row "$1" "$3" calls "$tmp/calls.n" "${by:+last run: $by}"
}

# ------------------------------------------------------------------ background processes
# Only processes this script started, by PID, with their children; stopped at exit.
# bg_pids: servers for the whole run (etcd); job_pids: the current measurement's commands.
bg_pids=()
job_pids=()

# kill_tree PID: a process this script started and its children (a background eval may fork).
kill_tree() {
  local c
  for c in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$c"; done
  kill "$1" 2>/dev/null || true
}

stop_bg() {
  local p
  for p in "${job_pids[@]}" "${bg_pids[@]}"; do
    kill_tree "$p"
  done
  for p in "${job_pids[@]}" "${bg_pids[@]}"; do
    wait "$p" 2>/dev/null || true
  done
  job_pids=()
  bg_pids=()
}

# wait_for SECONDS COMMAND...: polls COMMAND every 10 ms until it succeeds; fails after SECONDS.
wait_for() {
  local deadline=$((${EPOCHREALTIME/./} + $1 * 1000000))
  shift
  until "$@"; do
    [ "${EPOCHREALTIME/./}" -lt "$deadline" ] || return 1
    sleep 0.01
  done
}

# ------------------------------------------------------------------ servers
# Splits a server DSN into a client option file (MySQL) or a libpq environment file
# (PostgreSQL), both mode 600 in $tmp; the password is percent-decoded, never printed.
split_dsn() {  # split_dsn mysql|postgres DSN OUTFILE
  DSN=$2 python3 - "$1" "$3" <<'PY'
import os, shlex, sys
from urllib.parse import parse_qsl, urlsplit, unquote
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
                 "database": "PGDATABASE", "sslmode": "PGSSLMODE"}
        parts["sslmode"] = dict(parse_qsl(u.query)).get("sslmode", "")
        f.write("".join(f"export {names[k]}={shlex.quote(v)}\n" for k, v in parts.items() if v))
PY
}

# my SQL / pg SQL: one statement through the command-line client, tab/space-separated rows.
my() { "$mysql_client" --defaults-extra-file="$tmp/my.cnf" -N -B -e "$1"; }
pg() { psql -X -q -A -t -F ' ' -v ON_ERROR_STOP=1 -c "$1"; }

# drop_tables mysql|postgres PREFIX: dblock's tables under PREFIX, gone; each bench starts from
# fresh ones, so tables an earlier build made (maybe of another shape) never get in the way;
# the floors' tables too (pg_floor.c, mysql_floor.c), so a key an interrupted bench left taken
# does not refuse every floor run of the next.
drop_tables() {
  local sql="DROP TABLE IF EXISTS ${2}locks, ${2}runs, ${2}claims, ${2}pg_floor, ${2}my_floor"
  if [ "$1" = mysql ]; then my "$sql"; else pg "$sql"; fi
}

# plaintext_pg DSN: DSN with sslmode=disable unless it names an sslmode. The bench speaks to its
# PostgreSQL in plaintext, as to its MariaDB (libmariadb asks for no TLS unless told) and its
# etcd (http://): a comparison with etcdctl or between the servers then measures the same
# transport, where libpq's default (prefer) would take TLS wherever the server offers it, as the
# test servers do (scripts/test-servers.sh). What TLS adds is a row of the distance section.
plaintext_pg() {
  case $1 in
    *[?\&]sslmode=*) printf '%s\n' "$1" ;;
    *\?*) printf '%s&sslmode=disable\n' "$1" ;;
    *) printf '%s?sslmode=disable\n' "$1" ;;
  esac
}

# dsn_of BACKEND: the DSN dblock gets for sqlite (a file in $tmp), mysql or postgres.
dsn_of() {
  case $1 in
    sqlite) echo "sqlite:$tmp/bench.db" ;;
    mysql) echo "$mysql_dsn" ;;
    postgres) echo "$postgres_dsn" ;;
  esac
}

# dbl BACKEND [ARGS...]: a command string running dblock against BACKEND, for `cell`/eval. The
# DSN is an environment assignment inside the string, never an argument (ps shows those).
dbl() {
  local b=$1
  shift
  printf 'DBLOCK_DSN=%q %q' "$(dsn_of "$b")" "$bin"
  [ $# -eq 0 ] || printf ' %q' "$@"
}

# backends_on: the backends this run measures (sqlite always; a server when its DSN is set).
backends_on() {
  echo sqlite
  [ -z "$mysql_dsn" ] || echo mysql
  [ -z "$postgres_dsn" ] || echo postgres
}

# strategies_of BACKEND
strategies_of() {
  case $1 in
    sqlite) echo lease ;;
    *) echo lease advisory for-update txn-insert ;;
  esac
}

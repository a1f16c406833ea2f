# shellcheck shell=bash
# Sections "handoff" and "throughput": one key passed from one run to the next, for every
# backend x strategy and the peers flock(1) and `etcdctl lock`. Sourced.
#
# A cell is "BACKEND:STRATEGY" (sqlite, mysql, postgres), "flock" or "etcd".

# handoff_cells: every cell this run can measure.
handoff_cells() {
  local b s
  for b in $(backends_on); do
    for s in $(strategies_of "$b"); do echo "$b:$s"; done
  done
  echo flock
  [ -z "${etcd_endpoint:-}" ] || echo etcd
}
cell_label() {
  case $1 in
    flock) echo "flock(1)" ;;
    etcd) echo "etcdctl lock" ;;
    *) echo "${1%%:*} ${1#*:}" ;;
  esac
}

# locked CELL KEY WAIT_SECONDS: a command prefix that runs the command appended to it while
# holding KEY, waiting up to WAIT_SECONDS for it (0: do not wait).
locked() {
  local cell=$1 key=$2 w=$3
  case $cell in
    flock) printf 'flock -w %s %q' "$w" "$tmp/flock.$key" ;;
    etcd) printf 'timeout %s etcdctl --endpoints=%s lock %q --' "$((w + 60))" "$etcd_endpoint" "$key" ;;
    *)
      if [ "$w" -gt 0 ]; then
        dbl "${cell%%:*}" -s "${cell#*:}" -v run "$key" -w "$w" --
      else
        dbl "${cell%%:*}" -s "${cell#*:}" run "$key" --
      fi
      ;;
  esac
}

# waiting CELL KEY DIR: succeeds once the waiter provably waits for KEY. dblock says so on
# stderr (-v) when it polls; strategies that block inside the server are seen there.
waiting() {
  local cell=$1 key=$2 dir=$3 inode
  case $cell in
    flock)
      inode=$(stat -c %i "$tmp/flock.$key")
      grep -q -- "-> FLOCK .*:$inode " /proc/locks
      ;;
    etcd)  # each contender puts one key under the lock's prefix
      [ "$(etcdctl --endpoints="$etcd_endpoint" get --prefix --keys-only "$key" 2>/dev/null | grep -c .)" -ge 2 ]
      ;;
    mysql:*)
      grep -q " is held" "$dir/err.w" 2>/dev/null ||
        [ "$(my "SELECT (SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT')
                      + (SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE LIKE '%user lock%')" 2>/dev/null || echo 0)" -gt 0 ]
      ;;
    postgres:*)
      grep -q " is held" "$dir/err.w" 2>/dev/null ||
        [ "$(pg "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'" 2>/dev/null || echo 0)" -gt 0 ]
      ;;
    *) grep -q " is held" "$dir/err.w" 2>/dev/null ;;
  esac
}

alive_or_file() { [ -e "$1" ] || ! kill -0 "$2" 2>/dev/null; }

# make_holder_script: $tmp/holder.sh DIR, the command of a holder: marks DIR/held, waits for
# DIR/release (at most about 120 s, so an interrupted bench leaves nothing behind), then
# writes its end time to DIR/t1.
make_holder_script() {
  cat >"$tmp/holder.sh" <<'SH'
: >"$1/held"
i=0
while [ ! -e "$1/release" ]; do
  i=$((i + 1))
  [ "$i" -le 24000 ] || exit 1
  sleep 0.005
done
date +%s%N >"$1/t1"
SH
}

# one_handoff CELL: prints one handoff in ms (holder's command ends -> waiter's command starts).
# The holder's command marks that it holds the lock and waits for a release file; the bench
# starts the waiter, waits (at most 10 s) until the waiter provably waits, gives it 0.2 s more,
# then releases: the holder writes its end time and ends, the waiter's command writes its start
# time. Without that wait a waiter slow to start on a loaded machine would measure its own
# start-up, not the handoff.
one_handoff() {
  local cell=$1 key="handoff-${1//:/-}" d=$tmp/handoff hp wp t1 t2
  rm -rf "$d"
  mkdir "$d"
  eval "$(locked "$cell" "$key" 0) sh $(printf %q "$tmp/holder.sh") $(printf %q "$d")" >/dev/null 2>"$d/err.h" &
  hp=$!
  job_pids=("$hp")
  if ! wait_for 10 alive_or_file "$d/held" "$hp" || [ ! -e "$d/held" ]; then
    kill_tree "$hp"; wait "$hp" 2>/dev/null || true
    echo "holder never ran: $(head -n 1 "$d/err.h")" >&2
    return 1
  fi
  eval "$(locked "$cell" "$key" 10) sh -c 'date +%s%N >\"\$1/t2\"' sh $(printf %q "$d")" >/dev/null 2>"$d/err.w" &
  wp=$!
  job_pids=("$hp" "$wp")
  if ! wait_for 10 waiting "$cell" "$key" "$d"; then
    kill_tree "$wp"; kill_tree "$hp"; wait "$wp" "$hp" 2>/dev/null || true
    echo "the waiter never waited: $(grep -v '^$' "$d/err.w" | tail -n 1)" >&2
    return 1
  fi
  sleep 0.2
  : >"$d/release"
  if ! wait "$hp"; then
    kill_tree "$wp"; wait "$wp" 2>/dev/null || true
    echo "holder failed: $(tail -n 1 "$d/err.h")" >&2
    return 1
  fi
  wait "$wp" || { echo "waiter failed: $(grep -v ' is held\|^$' "$d/err.w" | tail -n 1)" >&2; return 1; }
  job_pids=()
  if [ ! -s "$d/t1" ] || [ ! -s "$d/t2" ]; then echo "a command did not run" >&2; return 1; fi
  t1=$(cat "$d/t1") t2=$(cat "$d/t2")
  [ "$t2" -gt "$t1" ] || { echo "waiter started $(((t1 - t2) / 1000)) us before the holder ended: overlap" >&2; return 1; }
  echo "$(((t2 - t1) / 1000000)).$(printf '%03d' $((((t2 - t1) / 1000) % 1000)))"
}

# handoff: $handoff_runs rounds, one handoff of every cell per round (interleaved).
section_handoff() {
  say "handoff"
  local c i group
  local -a cells dead=() goal
  mapfile -t cells < <(handoff_cells)
  make_holder_script
  for c in "${!cells[@]}"; do
    : >"$tmp/handoff.$c"
    case ${cells[$c]} in
      flock | etcd) ;;
      *) eval "$(dbl "${cells[$c]%%:*}" init)" >/dev/null 2>&1 || true ;;
    esac
  done
  for ((i = 0; i < handoff_runs; i++)); do
    for c in "${!cells[@]}"; do
      [ -z "${dead[c]:-}" ] || continue
      one_handoff "${cells[$c]}" >>"$tmp/handoff.$c" 2>"$tmp/err.handoff" ||
        dead[c]="round $((i + 1)): $(tail -n 1 "$tmp/err.handoff")"
      job_pids=()  # ended, one way or the other
    done
  done
  : >"$out/handoff.dat"
  for c in "${!cells[@]}"; do
    if [ -n "${dead[c]:-}" ]; then
      fail_row handoff "$(cell_label "${cells[$c]}")" "${dead[c]}"
    else
      # Issue 30's goal for dblock's own cells (the peers are references).
      goal=("" "<=" 5)
      case ${cells[$c]} in flock | etcd) goal=() ;; esac
      stat_row handoff "$(cell_label "${cells[$c]}")" ms "$tmp/handoff.$c" "${goal[@]}"
      case ${cells[$c]} in sqlite:*) group=1 ;; mysql:*) group=2 ;; postgres:*) group=3 ;; *) group=4 ;; esac
      printf '"%s" %s %s\n' "$(cell_label "${cells[$c]}")" "$(stats "$tmp/handoff.$c" | cut -d' ' -f1-3)" "$group" >>"$out/handoff.dat"
    fi
  done
}

# all_waiting CELL KEY DIR N: succeeds once N runs provably wait for KEY: each dblock says so on
# its own stderr (-v: " is held", after its first busy answer); flock's waiters are in
# /proc/locks; etcd's each put a key under the lock's prefix, as the holder did.
all_waiting() {
  local cell=$1 key=$2 dir=$3 n=$4 inode
  case $cell in
    flock)
      inode=$(stat -c %i "$tmp/flock.$key")
      [ "$(grep -c -- "-> FLOCK .*:$inode " /proc/locks)" -ge "$n" ]
      ;;
    etcd) [ "$(etcdctl --endpoints="$etcd_endpoint" get --prefix --keys-only "$key" 2>/dev/null | grep -c .)" -ge $((n + 1)) ] ;;
    *) [ "$(grep -l " is held" "$dir"/err.* 2>/dev/null | wc -l)" -ge "$n" ] ;;
  esac
}

# wait_counting_failures PID...: waits for each; $failed is how many exited non-zero (a
# variable, not output: `wait` must run in this shell, the processes' parent).
wait_counting_failures() {
  local p rc
  failed=0
  for p in "$@"; do
    rc=0
    wait "$p" || rc=$?
    [ "$rc" -eq 0 ] || failed=$((failed + 1))
  done
}
per_second() { awk -v n="$1" -v us="$2" 'BEGIN { printf "%.2f", n / (us / 1e6) }'; }  # per_second N MICROSECONDS

# throughput, per cell, two figures with $waiters runs of a trivial command on one key, each
# measured $tp_rounds times (rounds interleave the cells: A B C A B C ...), median and min-max:
#  - handoffs/s: a holder keeps the key until all $waiters runs provably wait, then lets go;
#    handoffs/s = runs / (holder's release -> the last run's end). This is the lock's own rate:
#    no run's start-up or connection is inside it.
#  - start storm: the runs are started together on a free key; runs/s = runs / (first start ->
#    last end), so every run's start-up and connection set-up counts (on 2 cores, PostgreSQL's
#    SCRAM authentication and libpq's libraries dominate it).
# Failed runs (either figure, all rounds) must be 0.
section_throughput() {
  say "throughput ($waiters waiters, $tp_rounds rounds)"
  local cell round id
  make_holder_script
  for cell in $(handoff_cells); do
    case $cell in
      flock | etcd) ;;
      *) eval "$(dbl "${cell%%:*}" init)" >/dev/null 2>&1 || true ;;
    esac
    id=${cell//:/-}
    : >"$tmp/tp.$id.rate"
    : >"$tmp/tp.$id.storm"
    echo 0 >"$tmp/tp.$id.errors"
    echo 0 >"$tmp/tp.$id.storm_errors"
    : >"$tmp/tp.$id.why"
  done
  for ((round = 1; round <= tp_rounds; round++)); do
    for cell in $(handoff_cells); do throughput_round "$cell"; done
  done
  for cell in $(handoff_cells); do
    id=${cell//:/-}
    throughput_rows "$cell" "$(cat "$tmp/tp.$id.errors")" "$(cat "$tmp/tp.$id.storm_errors")"
  done
}

# throughput_round CELL: one handoffs/s and one start storm sample of CELL, into $tmp/tp.<id>.*.
throughput_round() {
  local cell=$1 id=${1//:/-} key i t0 t1 errors prefix hp d=$tmp/tp failed
  local -a pids
  key="tp-$id"
  prefix=$(locked "$cell" "$key" 300)
  errors=0

  # handoffs/s, once everyone waits.
  rm -rf "$d"
  mkdir "$d"
  eval "$(locked "$cell" "$key" 0) sh $(printf %q "$tmp/holder.sh") $(printf %q "$d")" >/dev/null 2>"$d/holder.err" &
  hp=$!
  pids=()
  if wait_for 30 alive_or_file "$d/held" "$hp" && [ -e "$d/held" ]; then
    for ((i = 0; i < waiters; i++)); do
      eval "$prefix true" >/dev/null 2>"$d/err.$i" &
      pids+=($!)
    done
    job_pids=("$hp" "${pids[@]}")
    if ! wait_for 120 all_waiting "$cell" "$key" "$d" "$waiters"; then
      errors=$waiters
      say "FAILED: throughput, $(cell_label "$cell"): not all $waiters runs were waiting after 120 s"
    fi
    t0=${EPOCHREALTIME/./}
    : >"$d/release"
    wait_counting_failures "$hp" "${pids[@]}"
    errors=$((errors + failed))
    t1=${EPOCHREALTIME/./}
  else
    kill_tree "$hp"; wait "$hp" 2>/dev/null || true
    errors=$((waiters + 1)) t0=0 t1=1
  fi
  job_pids=()
  if [ "$errors" -eq 0 ]; then
    echo "$(per_second "$waiters" $((t1 - t0)))" >>"$tmp/tp.$id.rate"
  else
    echo $(($(cat "$tmp/tp.$id.errors") + errors)) >"$tmp/tp.$id.errors"
    [ -s "$tmp/tp.$id.why" ] || cat "$d"/holder.err "$d"/err.* 2>/dev/null |
      grep -v ' is held\|^$\|^dblock: \(acquired\|database\|--kill\|released\|retrying\|a release\)' | head -n 1 >"$tmp/tp.$id.why" ||
      true  # head's early exit is SIGPIPE upstream, which pipefail would make the bench's end
    say "FAILED: throughput, $(cell_label "$cell"): $errors of $waiters runs failed"
  fi

  # start storm: all started together on the free key.
  pids=()
  : >"$tmp/err.tp"
  t0=${EPOCHREALTIME/./}
  for ((i = 0; i < waiters; i++)); do
    eval "$prefix true" >/dev/null 2>>"$tmp/err.tp" &
    pids+=($!)
  done
  job_pids=("${pids[@]}")
  wait_counting_failures "${pids[@]}"
  errors=$failed
  t1=${EPOCHREALTIME/./}
  job_pids=()
  if [ "$errors" -eq 0 ]; then
    echo "$(per_second "$waiters" $((t1 - t0)))" >>"$tmp/tp.$id.storm"
  else
    echo $(($(cat "$tmp/tp.$id.storm_errors") + errors)) >"$tmp/tp.$id.storm_errors"
    grep -v ' is held\|^$' "$tmp/err.tp" | head -n 1 >"$tmp/tp.$id.storm_why"
    say "FAILED: throughput storm, $(cell_label "$cell"): $errors of $waiters runs failed"
  fi
}

# throughput_rows CELL ERRORS STORM_ERRORS: the cell's rows from its rounds' samples.
throughput_rows() {
  local cell=$1 id=${1//:/-} label
  label=$(cell_label "$cell")
  if [ "$2" -eq 0 ]; then
    result throughput "errors, $label" runs 0 "" "" "$((waiters * tp_rounds))" ""
    # The goal is for 100 waiters and dblock's own cells.
    local goal=()
    [ "$waiters" -ne 100 ] || [ "$cell" = flock ] || [ "$cell" = etcd ] || goal=(">=" 200)
    stat_row throughput "handoffs/s, $label" "1/s" "$tmp/tp.$id.rate" "$waiters handoffs a round, all waiting first" "${goal[@]}"
  else
    result throughput "errors, $label" runs "$2" "" "" "$((waiters * tp_rounds))" \
      "FAILED (must be 0): $(cat "$tmp/tp.$id.why")"
    failures=$((failures + 1))
  fi
  if [ "$3" -eq 0 ]; then
    stat_row throughput "start storm runs/s, $label" "1/s" "$tmp/tp.$id.storm" "$waiters runs started together"
  else
    result throughput "start storm errors, $label" runs "$3" "" "" "$((waiters * tp_rounds))" \
      "FAILED (must be 0): $(cat "$tmp/tp.$id.storm_why" 2>/dev/null)"
    failures=$((failures + 1))
  fi
}

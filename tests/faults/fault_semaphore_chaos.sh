#!/usr/bin/env bash
# Semaphore chaos (--slots 2, dblock(1) SEMAPHORES): six workers loop over
# `dblock run --slots 2 -w`, while the test kills random holders' dblock with SIGKILL. Never
# three commands at once (semaphore_job.sh's flock oracle, exact even for killed jobs), every
# token given once and greater than every token of a run that had ended before it was acquired
# (oracle.py tokens, on the job log and the history),
# DBLOCK_SLOT always 0 or 1, and no worker's run fails other than by its kill.
source "$(dirname "$0")/lib.sh"

s=$DBLOCK_STRATEGY
k=$(key chaos)
dir=$E2E_TMP/sem
mkdir -p "$dir"
: >"$dir/log"
JOB=$FAULTS_DIR/semaphore_job.sh
# The chaos lasts until CHAOS_KILLS holders were killed, CHAOS_SECONDS at most (with a kill
# every 1-1.4 s that is about 10 s; a fixed 20 s gave a dozen kills, more of the same case). The
# bound is 45 s: on a host whose page faults cost 20 us, PostgreSQL's runs spent so long starting
# that 20 s saw only 3-4 kills (no holder running at the other tries), under the 5 checked below.
CHAOS_SECONDS=${CHAOS_SECONDS:-45}
CHAOS_KILLS=${CHAOS_KILLS:-8}
dblock init >/dev/null 2>&1 || true

worker() {
  local i=$1
  while [ ! -e "$E2E_TMP/stop" ]; do
    dblock run --slots 2 -w 60 --ttl 3s "$k" -- "$JOB" "$dir" 2 "0.$((RANDOM % 6 + 2))" >>"$E2E_TMP/w$i.out" 2>&1
    echo $? >>"$E2E_TMP/w$i.rc"
  done
}
workers=()
for i in 1 2 3 4 5 6; do
  worker $i &
  workers+=($!)
  remember_pid $!
done

kills=0
deadline=$(($(now_ms) + CHAOS_SECONDS * 1000))
while [ "$(now_ms)" -lt "$deadline" ] && [ "$kills" -lt "$CHAOS_KILLS" ]; do
  sleep "1.$((RANDOM % 5))"
  kill_running_holder "$dir/log" && kills=$((kills + 1))
done
touch "$E2E_TMP/stop"
for pid in "${workers[@]}"; do
  wait_exit rc "$pid" 90
  [ "$rc" = 0 ] || fail "$s: a worker did not finish after the chaos ($rc)"
done

check "$s: SIGKILLed at least 5 holders ($kills)" test "$kills" -ge 5
if [ -s "$dir/over" ]; then
  fail "$s: more than 2 commands ran at once: $(head -n 3 "$dir/over" | tr '\n' ';')"
else
  pass "$s: never more than 2 commands at once ($(grep -c '^start' "$dir/log") runs, $kills killed)"
fi
dblock history --json --limit 100000 "$k" >"$dir/history.json" || fail "$s: dblock history failed"
if out=$(python3 "$ORACLE" tokens "$dir/log" 10 "$dir/history.json" 2>&1); then pass "$s: tokens: $out"; else fail "$s: tokens: $out"; fi
assert_eq "$s: DBLOCK_SLOT was 0 or 1" "" "$(awk '$1 == "start" && $5 != 0 && $5 != 1' "$dir/log")"
others=$(cat "$E2E_TMP"/w*.rc | grep -vxE '0|137' | sort | uniq -c | xargs)
assert_eq "$s: every run exited 0, or 137 when killed" "" "$others"
[ -z "$others" ] || tail -n 5 "$E2E_TMP"/w*.out | sed 's/^/    /'
finish

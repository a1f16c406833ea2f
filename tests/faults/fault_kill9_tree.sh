#!/usr/bin/env bash
# kill -9 of dblock takes the whole job with it: a shell command with a grandchild, a
# background job, a pipeline, a process that left the group with setsid and a double-forked
# one are all dead within 1 s; a competitor waiting with -w starts only after every one of
# them is dead (session strategies: the server keeps the lock until then; lease: at expiry).
source "$(dirname "$0")/lib.sh"

s=$DBLOCK_STRATEGY
k=$(key tree)
log=$E2E_TMP/log
pids=$E2E_TMP/job.pids
job_script='
  pids=$1; shift
  echo $$ >>"$pids"
  sleep 60 & echo $! >>"$pids"
  (sleep 60 | cat) & echo $! >>"$pids"
  setsid sleep 60 & echo $! >>"$pids"
  (sh -c "sleep 60 & echo \$! >>\"$pids\"" &)
  exec "$@"'
dblock run "$k" --ttl 6s --kill-after 0.5s -- bash -c "$job_script" job "$pids" "$ORACLE_JOB" "$log" 60 "$pids" &
holder=$!
remember_pid $holder
if ! wait_for 10 bash -c "[ \$(cat '$pids' 2>/dev/null | wc -l) -ge 6 ]" || ! wait_for 10 is_held "$k"; then
  fail "$s: the job did not start"
  finish
fi
token=$(awk '$1 == "start" {print $2}' "$log")
pgid=$(head -n 1 "$pids")
{ tr ' ' '\n' <"$pids"; group_members "$pgid"; } | grep . | sort -u >"$E2E_TMP/all.pids.raw"
# Each with its start time: a pid reused after the job died must not pass for the job.
# shellcheck disable=SC2046
process_ids $(cat "$E2E_TMP/all.pids.raw") >"$E2E_TMP/all.pids"
echo "      $s: job processes: $(tr '\n' ' ' <"$E2E_TMP/all.pids")"

start_competitor competitor "$k" "$E2E_TMP/all.pids" "$E2E_TMP/alive_at_start" "$log"
sleep 0.5

# shellcheck disable=SC2046
watch_death "$E2E_TMP/dead_at" $(cat "$E2E_TMP/all.pids")
sleep 0.2
killed=$(date +%s%N)
kill -KILL $holder
wait_for 5 test -s "$E2E_TMP/dead_at"
dead_at=$(cat "$E2E_TMP/dead_at" 2>/dev/null || date +%s%N)
dead_ms=$(( (dead_at - killed) / 1000000 ))
echo "end $token $(cat "$E2E_TMP/dead_at.alive" 2>/dev/null || echo "$dead_at") 0 killed" >>"$log"
echo "      $s: every job process dead $dead_ms ms after kill -9 of dblock"
check "$s: no job process outlives kill -9 of dblock" bash -c "! { $(declare -f pids_alive); pids_alive $(tr '\n' ' ' <"$E2E_TMP/all.pids"); }"
assert_between "$s: the job died within 1 s" 0 1000 "$dead_ms"

rc=none
wait $competitor && rc=0 || rc=$?
assert_eq "$s: the competitor ran" 0 "$rc"
check "$s: no job process was alive when the competitor started" test ! -s "$E2E_TMP/alive_at_start"
started=$(awk '$1 == "start" && $2 != "'"$token"'" {print int($3 / 1000000)}' "$log")
echo "      $s: the competitor started $((started - killed / 1000000)) ms after kill -9"
oracle_check "$s: one job at a time" "$log" 2
finish

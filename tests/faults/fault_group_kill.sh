#!/usr/bin/env bash
# A signal aimed at dblock's whole process group (`timeout -s KILL`, `kill -9 -PGID`,
# `kill -TERM -PGID`, a shell's job control) must not leave the job running with the lock
# freed: the guard is out of that group, so it survives, kills the job's whole tree (the
# command's grandchild included, which the parent-death signal alone does not reach) and only
# then lets the lock go. A competitor waiting with -w starts after every job process is dead,
# with a greater token (the oracle judges).
source "$(dirname "$0")/lib.sh"

s=$DBLOCK_STRATEGY
# The job: a shell whose grandchild is the oracle job's own `sleep` (sh -> oracle_job.sh -> sleep).
job_cmd='"$@"; echo unreachable'


# case NAME: one holder killed the NAME way, one competitor waiting for it.
kill_case() {
  local how=$1 k log pids holder competitor rc killed dead_at dead_ms token started
  k=$(key "group-$how")
  log=$E2E_TMP/log.$how
  pids=$E2E_TMP/job.$how
  : >"$pids"
  # setsid: dblock leads a process group (and session) of its own, as under a terminal's job
  # control, so the whole group can be killed without touching this script.
  case $how in
    # timeout's own expiry is a SIGALRM to it (coreutils: timer or alarm), sent below once the
    # job and the competitor are in place: a fixed 3 s expired before the job started at a
    # load of ~190 ("the job did not start").
    timeout) timeout -s KILL 120 dblock run "$k" --ttl 3s -- sh -c "$job_cmd" job "$ORACLE_JOB" "$log" 60 "$pids" & ;;
    *) setsid dblock run "$k" --ttl 3s -- sh -c "$job_cmd" job "$ORACLE_JOB" "$log" 60 "$pids" & ;;
  esac
  holder=$!
  remember_pid $holder
  if ! wait_for 10 bash -c "[ \$(wc -w <'$pids') -ge 2 ]" || ! wait_for 10 is_held "$k"; then
    fail "$s/$how: the job did not start"
    return
  fi
  token=$(awk '$1 == "start" {print $2}' "$log")
  # The job's processes: sh, oracle_job.sh and its sleep.
  { tr ' ' '\n' <"$pids"; pgrep -P "$(awk '{print $1}' "$pids")" 2>/dev/null; ps -o ppid= -p "$(awk '{print $1}' "$pids")"; } |
    tr -d ' ' | grep . | sort -u >"$E2E_TMP/all.$how.pids"
  # Each with its start time: a pid reused after the job died must not pass for the job.
  # shellcheck disable=SC2046
  process_ids $(cat "$E2E_TMP/all.$how.pids") >"$E2E_TMP/all.$how"
  echo "      $s/$how: job processes: $(tr '\n' ' ' <"$E2E_TMP/all.$how")"

  start_competitor competitor "$k" "$E2E_TMP/all.$how" "$E2E_TMP/alive.$how" "$log"
  sleep 0.5

  # shellcheck disable=SC2046
  watch_death "$E2E_TMP/dead.$how" $(cat "$E2E_TMP/all.$how")
  case $how in
    timeout) killed=$(date +%s%N); kill -ALRM "$holder"; wait "$holder" 2>/dev/null ;;  # it kills the group
    kill9) killed=$(date +%s%N); kill -KILL -- "-$holder" ;;
    term) killed=$(date +%s%N); kill -TERM -- "-$holder" ;;
  esac
  wait_for 8 test -s "$E2E_TMP/dead.$how"
  dead_at=$(cat "$E2E_TMP/dead.$how" 2>/dev/null || date +%s%N)
  # SIGKILL: the job could not log its end; it ran at least until watch_death last saw it;
  # SIGTERM: it logged its end itself (exit 143).
  [ "$how" = term ] || echo "end $token $(cat "$E2E_TMP/dead.$how.alive" 2>/dev/null || echo "$dead_at") 0 killed" >>"$log"
  check "$s/$how: no job process outlives the group kill" \
    bash -c "! { $(declare -f pids_alive); pids_alive $(tr '\n' ' ' <"$E2E_TMP/all.$how"); }"
  dead_ms=$(((dead_at - killed) / 1000000))
  assert_between "$s/$how: the job died within 2 s" 0 2000 "$dead_ms"
  echo "      $s/$how: every job process dead $dead_ms ms after the kill"

  rc=none
  wait $competitor && rc=0 || rc=$?
  assert_eq "$s/$how: the competitor ran" 0 "$rc"
  check "$s/$how: no job process was alive when the competitor started" test ! -s "$E2E_TMP/alive.$how"
  started=$(awk '$1 == "start" && $2 != "'"$token"'" {print int($3 / 1000000)}' "$log")
  echo "      $s/$how: the competitor started $((started - killed / 1000000)) ms after the kill"
  oracle_check "$s/$how: one job at a time" "$log" 2
}

kill_case timeout
kill_case kill9
kill_case term
finish

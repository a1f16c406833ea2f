#!/usr/bin/env bash
# The server ends the holder's session (KILL CONNECTION, pg_terminate_backend): the lock is
# gone at once, so dblock must stop its command at once, not at the next renew. Measures the
# detection time (kill -> the holder's command ended) and the overlap with a competitor that
# was waiting (allowed: 200 ms, the documented window); the holder exits 76.
source "$(dirname "$0")/lib.sh"

s=$DBLOCK_STRATEGY
k=$(key killed)
log=$E2E_TMP/log
# --ttl 18s: the next renew is 6 s away, so only watching the socket can notice in time.
# --kill-after 4s: the job's TERM trap writes its end to the oracle's log; on a loaded machine
# it once took longer than 1 s, was SIGKILLed first, and its run read as never ended.
# -v: the holder's log says whether SIGKILL was sent.
if ! start_job_holder "$k" "$log" 60 --ttl 18s --kill-after 4s -v; then
  fail "$s: the holder never started"
  finish
fi
dblock run "$k" -w 30 -- "$ORACLE_JOB" "$log" 0.2 &
competitor=$!
remember_pid $competitor
sleep 0.5

killed=$(date +%s%N)
check "$s: the server ended the holder's session" kill_holder_session "$k"
rc=none
if wait_for 10 bash -c "! kill -0 $holder 2>/dev/null"; then wait $holder; rc=$?; fi
assert_eq "$s: the holder exits 76" 76 "$rc"
ended=$(awk -v t="$token" '$1 == "end" && $2 == t {print $3}' "$log")
detect_ms=$(( (${ended:-0} - killed) / 1000000 ))
echo "      $s: the holder's command ended $detect_ms ms after the session was killed"
[ -n "$ended" ] || sed 's/^/    | holder: /' "$E2E_TMP/holder.err"
# Required: noticed within 100 ms; the window is generous for a loaded CI machine.
assert_between "$s: the command was stopped at once, not at the next renew" 0 1500 "$detect_ms"
check "$s: the holder said why" grep -q "closed the session" "$E2E_TMP/holder.err"
wait $competitor
assert_eq "$s: the competitor ran" 0 $?
started=$(awk -v t="$token" '$1 == "start" && $2 != t {print $3}' "$log")
echo "      $s: the competitor started $(( (${started:-0} - killed) / 1000000 )) ms after the kill; overlap $(( (${ended:-0} - ${started:-0}) / 1000000 )) ms (negative: none)"
oracle_check "$s: overlap at most 200 ms, tokens increase" "$log" 2 200
finish

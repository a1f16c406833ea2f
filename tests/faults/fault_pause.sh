#!/usr/bin/env bash
# dblock paused (SIGSTOP, a VM freeze) for 2 x TTL, alone and together with its command, then
# resumed. Lease: the lease expired meanwhile and a competitor took it with a larger token;
# the resumed holder must kill its command within 1 s and exit 76 (the pause itself is a
# window no lease can close: the fencing token is the defence). Session strategies: the
# session kept the lock, so no competitor gets it and the holder is not falsely lost.
source "$(dirname "$0")/lib.sh"

s=$DBLOCK_STRATEGY
ttl=4.5
pause=9

for what in alone with-command; do
  k=$(key "pause-$what")
  log=$E2E_TMP/log.$what
  hold=60
  is_session_strategy && hold=$((pause + 4))
  if ! start_job_holder "$k" "$log" "$hold" --ttl ${ttl}s --kill-after 0.5s; then
    fail "$s $what: the holder never started"
    continue
  fi
  pgid=$(awk '$1 == "start" {print $4}' "$log")
  kill -STOP $holder
  [ $what = with-command ] && kill -STOP -- "-$pgid"
  stopped=$(now_ms)
  # The competitor waits for the whole pause and a bit.
  comp_rc=0
  dblock run "$k" -w $((pause - 1)) -- "$ORACLE_JOB" "$log" 0.3 || comp_rc=$?
  sleep $(( (pause * 1000 - ($(now_ms) - stopped)) / 1000 )) 2>/dev/null
  [ $what = with-command ] && kill -CONT -- "-$pgid"
  resumed=$(date +%s%N)
  kill -CONT $holder
  rc=none
  if wait_for $((hold + 10)) bash -c "! kill -0 $holder 2>/dev/null"; then wait $holder; rc=$?; fi
  if is_session_strategy; then
    assert_eq "$s $what: no competitor got the lock during the pause" 75 "$comp_rc"
    assert_eq "$s $what: the holder was not falsely lost" 0 "$rc"
    oracle_check "$s $what: one job, never overlapped" "$log" 1
  else
    assert_eq "$s $what: the competitor ran during the pause" 0 "$comp_rc"
    assert_eq "$s $what: the resumed holder exits 76" 76 "$rc"
    ended=$(awk -v t="$token" '$1 == "end" && $2 == t {print $3}' "$log")
    # A job killed by SIGKILL cannot log its end: then the holder's exit is its end.
    [ -n "$ended" ] || ended=$(date +%s%N)
    ms=$(( (ended - resumed) / 1000000 ))
    echo "      $s $what: the command ended $ms ms after SIGCONT"
    assert_between "$s $what: the resumed holder killed its command within 1 s" 0 1000 "$ms"
    other=$(awk -v t="$token" '$1 == "start" && $2 != t {print $2}' "$log")
    check "$s $what: the competitor's token ($other) is larger than the paused holder's ($token)" \
      test "${other:-0}" -gt "$token"
  fi
done
finish

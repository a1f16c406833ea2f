#!/usr/bin/env bash
# dblock paused (SIGSTOP, a VM freeze) for 2 x TTL, alone and together with its command, then
# resumed. Lease: the lease expired meanwhile and a competitor took it with a larger token;
# the resumed holder must kill its command within 1 s and exit 76 (the pause itself is a
# window no lease can close: the fencing token is the defence). Session strategies: the
# session kept the lock, so no competitor gets it and the holder is not falsely lost.
# The two cases use keys of their own and are paused side by side, so the test takes one pause.
source "$(dirname "$0")/lib.sh"

s=$DBLOCK_STRATEGY
ttl=4.5
pause=9
hold=60
is_session_strategy && hold=$((pause + 4))
cases=(alone with-command)
declare -A holders tokens pgids logs stopped comps resumed started

for what in "${cases[@]}"; do
  k=$(key "pause-$what")
  logs[$what]=$E2E_TMP/log.$what
  if start_job_holder "$k" "${logs[$what]}" "$hold" --ttl ${ttl}s --kill-after 0.5s; then
    holders[$what]=$holder
    tokens[$what]=$token
    pgids[$what]=$(awk '$1 == "start" {print $4}' "${logs[$what]}")
    started[$what]=1
  else
    fail "$s $what: the holder never started"
  fi
done
for what in "${cases[@]}"; do
  [ -n "${started[$what]:-}" ] || continue
  kill -STOP "${holders[$what]}"
  [ $what = with-command ] && kill -STOP -- "-${pgids[$what]}"
  stopped[$what]=$(now_ms)
done
# Each competitor waits for the whole pause and a bit.
for what in "${cases[@]}"; do
  [ -n "${started[$what]:-}" ] || continue
  start_bg pid dblock run "$(key "pause-$what")" -w $((pause - 1)) -- "$ORACLE_JOB" "${logs[$what]}" 0.3
  comps[$what]=$pid
done
for what in "${cases[@]}"; do
  [ -n "${started[$what]:-}" ] || continue
  comp_rc=none
  # -w $((pause - 1)) bounds it; the rest is slack for a loaded machine.
  if wait_for $((pause + 20)) pid_ended "${comps[$what]}"; then
    comp_rc=0
    wait "${comps[$what]}" || comp_rc=$?
  fi
  comps[$what]=$comp_rc
done
for what in "${cases[@]}"; do
  [ -n "${started[$what]:-}" ] || continue
  sleep $(( (pause * 1000 - ($(now_ms) - ${stopped[$what]})) / 1000 )) 2>/dev/null
  [ $what = with-command ] && kill -CONT -- "-${pgids[$what]}"
  resumed[$what]=$(date +%s%N)
  kill -CONT "${holders[$what]}"
done

# When each resumed holder exits (the end of a command killed by SIGKILL, which cannot log it).
declare -A exited
deadline=$((SECONDS + hold + 10))
while [ "$SECONDS" -lt "$deadline" ]; do
  running=0
  for what in "${cases[@]}"; do
    [ -n "${started[$what]:-}" ] && [ -z "${exited[$what]:-}" ] || continue
    if pid_ended "${holders[$what]}"; then exited[$what]=$(date +%s%N); else running=1; fi
  done
  [ $running = 1 ] || break
  sleep 0.05
done

for what in "${cases[@]}"; do
  [ -n "${started[$what]:-}" ] || continue
  holder=${holders[$what]} token=${tokens[$what]} log=${logs[$what]} comp_rc=${comps[$what]}
  rc=none
  if [ -n "${exited[$what]:-}" ]; then wait $holder; rc=$?; fi
  if is_session_strategy; then
    assert_eq "$s $what: no competitor got the lock during the pause" 75 "$comp_rc"
    assert_eq "$s $what: the holder was not falsely lost" 0 "$rc"
    oracle_check "$s $what: one job, never overlapped" "$log" 1
  else
    assert_eq "$s $what: the competitor ran during the pause" 0 "$comp_rc"
    assert_eq "$s $what: the resumed holder exits 76" 76 "$rc"
    ended=$(awk -v t="$token" '$1 == "end" && $2 == t {print $3}' "$log")
    # A job killed by SIGKILL cannot log its end: then the holder's exit is its end.
    [ -n "$ended" ] || ended=${exited[$what]:-$(date +%s%N)}
    ms=$(( (ended - ${resumed[$what]}) / 1000000 ))
    echo "      $s $what: the command ended $ms ms after SIGCONT"
    assert_between "$s $what: the resumed holder killed its command within 1 s" 0 1000 "$ms"
    other=$(awk -v t="$token" '$1 == "start" && $2 != t {print $2}' "$log")
    check "$s $what: the competitor's token ($other) is larger than the paused holder's ($token)" \
      test "${other:-0}" -gt "$token"
  fi
done
finish

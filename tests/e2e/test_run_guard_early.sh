#!/usr/bin/env bash
# The guard that starts the command (and kills the whole job if dblock is killed) is forked
# before the lock is asked for, so taking over a lock from the previous holder costs only the
# command's own fork and exec. Checks: a waiter already has its guard and no command; the
# command then gets the right token; a guard whose dblock skips or is killed while waiting
# leaves no process behind.
source "$(dirname "$0")/lib.sh"

s=$DBLOCK_STRATEGY
k=$(key early)

# children PID: the pids of PID's children, one per line.
children() { cat /proc/"$1"/task/*/children 2>/dev/null | tr ' ' '\n' | grep . ; }
# with_key: how many processes have the key in their command line.
with_key() { pgrep -c -f -- "$k" || true; }

start_bg h dblock run "$k" -- sh -c 'echo $DBLOCK_TOKEN >"$0"; while [ ! -e "$1" ]; do sleep 0.05; done' \
  "$E2E_TMP/early.htoken" "$E2E_TMP/early.release"
if wait_for 10 test -s "$E2E_TMP/early.htoken" && wait_for 10 is_held "$k"; then
  # A run that finds the lock busy: its guard is told nothing and ends with it.
  before=$(with_key)
  assert_status "$s: a busy run skips" 75 dblock run "$k" -- true
  assert_eq "$s: the skipped run left no process behind" "$before" "$(with_key)"

  start_bg w dblock run "$k" -w 30 -- sh -c 'echo $DBLOCK_TOKEN >"$0"' "$E2E_TMP/early.wtoken"
  wait_for 10 eval '[ "$(children $w | wc -l)" -ge 1 ]'
  sleep 0.5
  guard=$(children "$w")
  assert_eq "$s: a waiting run has one child, its guard" 1 "$(echo "$guard" | grep -c .)"
  assert_eq "$s: the guard has started nothing yet" 0 "$(children "$guard" | grep -c .)"
  check "$s: the waiter's command has not run" test ! -e "$E2E_TMP/early.wtoken"

  touch "$E2E_TMP/early.release"
  wait_exit hrc "$h"
  wait_exit wrc "$w" 30
  assert_eq "$s: the holder ended cleanly" 0 "$hrc"
  assert_eq "$s: the waiter ran its command" 0 "$wrc"
  htoken=$(cat "$E2E_TMP/early.htoken")
  wtoken=$(cat "$E2E_TMP/early.wtoken" 2>/dev/null || echo none)
  check "$s: the waiter's command got a newer token ($htoken -> $wtoken)" test "$wtoken" -gt "$htoken" 2>/dev/null
  check "$s: the token is the one history records" \
    eval 'dblock history --json "$k" | grep -q "\"token\": *$wtoken"'
else
  fail "$s: the holder never held $k"
fi

# kill -9 of a waiting dblock: its guard sees the control socket close and ends.
rm -f "$E2E_TMP/early.release"
start_bg h2 dblock run "$k" -- sh -c 'while [ ! -e "$0" ]; do sleep 0.05; done' "$E2E_TMP/early.release"
if wait_for 10 is_held "$k"; then
  start_bg w2 dblock run "$k" -w 30 -- touch "$E2E_TMP/early.never"
  wait_for 10 eval '[ "$(children $w2 | wc -l)" -ge 1 ]'
  guard=$(children "$w2" | head -n 1)
  check "$s: the waiting run has a guard" test -n "$guard"
  kill -KILL "$w2"
  wait "$w2" 2>/dev/null
  check "$s: the guard of a killed waiter ends" wait_for 5 eval '! kill -0 ${guard:-0} 2>/dev/null'
  touch "$E2E_TMP/early.release"
  wait_exit h2rc "$h2"
  check "$s: the killed waiter's command never ran" test ! -e "$E2E_TMP/early.never"
else
  fail "$s: the second holder never held $k"
fi

finish

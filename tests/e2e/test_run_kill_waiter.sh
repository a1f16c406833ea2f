#!/usr/bin/env bash
# kill -9 of a holder while another `run -w` is already waiting: a session lock passes to the
# waiter at once (the connection is gone), a lease after its TTL (nobody renews it).
source "$(dirname "$0")/lib.sh"

s=$DBLOCK_STRATEGY
k=$(key kill9)
start_bg h dblock run "$k" --ttl 4s --kill-after 0.3s -- sh -c 'echo $$ >"$0"; exec sleep 60' "$E2E_TMP/k9cmd"
if wait_for 10 test -s "$E2E_TMP/k9cmd" && wait_for 10 is_held "$k"; then
  start_bg w dblock run "$k" -w 30 -- sh -c 'date +%s%N >"$0"' "$E2E_TMP/k9next"
  sleep 1
  check "$s: the waiter is still waiting" test ! -e "$E2E_TMP/k9next"
  killed=$(date +%s%N)
  kill -KILL $h
  wait $h 2>/dev/null
  rc=none
  if wait_for 20 test -s "$E2E_TMP/k9next"; then wait $w; rc=$?; fi
  assert_eq "$s: the waiter ran after kill -9 of the holder" 0 "$rc"
  gap=$(( ($(cat "$E2E_TMP/k9next" 2>/dev/null || echo 0) - killed) / 1000000 ))
  echo "      $s: waiter started $gap ms after kill -9"
  if is_session_strategy; then
    assert_between "$s: the waiter got it at once" 0 2000 "$gap"
  else
    # The last renewal (every TTL/3) may have come just before the kill: expiry 2.7 s to 4 s later.
    assert_between "lease: the waiter got it after the TTL" 2000 12000 "$gap"
  fi
else
  fail "$s: the holder never held $k"
fi

finish

#!/usr/bin/env bash
# 40 waiters on one key: each runs exactly once, one at a time, in token order.
source "$(dirname "$0")/lib.sh"

s=$DBLOCK_STRATEGY
k=$(key many)
log=$E2E_TMP/log
n=40
pids=()
for i in $(seq $n); do
  dblock run "$k" -w 120 -- "$ORACLE_JOB" "$log" 0.02 2>>"$E2E_TMP/err" &
  pids+=($!)
  remember_pid $!
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
assert_eq "$s: all $n waiters exit 0" 0 "$failed"
[ $failed -eq 0 ] || head -n 5 "$E2E_TMP/err"
oracle_check "$s: $n runs, one at a time, in token order" "$log" $n
finish

#!/usr/bin/env bash
# The idle limit of a session-lock holder (2 x ttl + 5 s, see fault_frozen_proxy.sh) must only
# ever end a session that is cut off. With --ttl 3s the limit is 11 s:
#  - a holder whose command runs 14 s keeps its lock throughout (its renewals every 1 s keep
#    the session busy) and exits 0;
#  - a waiter whose holder session sits idle for ~16 s while it sleeps until --min-interval is
#    due finds that session ended by the server, replaces it (it held nothing) and runs.
source "$(dirname "$0")/lib.sh"

# The two cases use keys of their own and run side by side (one after the other, 31 s).
ka=$(key idle-holder)
kb=$(key idle-waiter)
loga=$E2E_TMP/log.holder
logb=$E2E_TMP/log.waiter

# --kill-after 0s: with --ttl 3s the renew interval (1 s) must cover the grace and the 1 s margin.
dblock run "$ka" --ttl 3s --kill-after 0s -- "$ORACLE_JOB" "$loga" 14 2>"$E2E_TMP/holder.err" &
holder=$!
remember_pid "$holder"
check "the holder's command starts" wait_for 30 grep -qs '^start' "$loga"
# The waiter's key: a first holder for 3 s, then the waiter queued behind it. (Started once
# the other key is held: two new keys taken at the same instant are not what this tests.)
dblock run "$kb" --ttl 3s --kill-after 0s -- "$ORACLE_JOB" "$logb" 3 2>"$E2E_TMP/first.err" &
first=$!
remember_pid "$first"
check "the waiter's key's first command starts" wait_for 30 grep -qs '^start' "$logb"
sleep 1
# --min-interval 21s, less its tolerance (a tenth): due 18.9 s after the first command's start.
# The waiter takes the lock when that one is done (3 s), finds it not yet due, and then sleeps
# about 16 s with its holder session open: well past the 11 s idle limit. (With a sleep of
# 10.6 s the session was never ended, and a loaded machine's later handoff woke the waiter
# just as the server ended it.)
dblock -v run "$kb" -w 60 --ttl 3s --kill-after 0s --min-interval 21s -- "$ORACLE_JOB" "$logb" 0.2 \
  2>"$E2E_TMP/waiter.err" &
waiter=$!
remember_pid "$waiter"

job_status holder_status 40 "$holder"
assert_eq "a holder busy for longer than its idle limit keeps the lock (exit 0)" 0 "$holder_status"
oracle_check "the holder ran its command once" "$loga" 1
job_status first_status 20 "$first"
assert_eq "the waiter's key's first holder exits 0" 0 "$first_status"
job_status waiter_status 60 "$waiter"
assert_eq "a waiter whose idle session the server ended still runs once due (exit 0)" 0 "$waiter_status"
check "the waiter slept until due" grep -q -- "sleeping until due" "$E2E_TMP/waiter.err"
# How long it slept: "due in 15.9s: sleeping until due". At least a second past the idle limit,
# or this run did not test what it is for.
slept_ms=$(sed -n 's/.*due in \([0-9.]*\)s: sleeping until due.*/\1/p' "$E2E_TMP/waiter.err" |
  awk '{ printf "%d", $1 * 1000 }')
assert_between "the waiter slept past the 11 s idle limit" 12000 40000 "${slept_ms:-0}"
oracle_check "first holder and waiter ran one after the other" "$logb" 2
if [ "$holder_status" != 0 ] || [ "$waiter_status" != 0 ] || [ "$first_status" != 0 ]; then
  echo "--- holder stderr"; cat "$E2E_TMP/holder.err"
  echo "--- first stderr"; cat "$E2E_TMP/first.err"
  echo "--- waiter stderr"; cat "$E2E_TMP/waiter.err"
  echo "--- oracle logs"; cat "$loga" "$logb"
fi
finish

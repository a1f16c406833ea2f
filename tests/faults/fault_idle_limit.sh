#!/usr/bin/env bash
# The idle limit of a session-lock holder (2 x ttl + 5 s, see fault_frozen_proxy.sh) must only
# ever end a session that is cut off. With --ttl 3s the limit is 11 s:
#  - a holder whose command runs 14 s keeps its lock throughout (its renewals every 1 s keep
#    the session busy) and exits 0;
#  - a waiter whose holder session sits idle for ~16 s while it sleeps until --min-interval is
#    due finds that session ended by the server, replaces it (it held nothing) and runs.
source "$(dirname "$0")/lib.sh"

k=$(key idle)
log=$E2E_TMP/log

# --kill-after 0s: with --ttl 3s the renew interval (1 s) must cover the grace and the 1 s margin.
dblock run "$k" --ttl 3s --kill-after 0s -- "$ORACLE_JOB" "$log" 14 2>"$E2E_TMP/holder.err" &
holder=$!
remember_pid "$holder"
check "the holder's command starts" wait_for 30 grep -qs '^start' "$log"
sleep 1
# --min-interval 34s, less its tolerance (a tenth): due 30.6 s after the holder's start. The
# waiter takes the lock when the holder is done (14 s), finds it not yet due, and then sleeps
# about 16 s with its holder session open: well past the 11 s idle limit. (With 28 s it slept
# 10.6 s on a quiet machine: the session was never ended, and a loaded machine's later handoff
# woke the waiter just as the server ended it.)
dblock -v run "$k" -w 60 --ttl 3s --kill-after 0s --min-interval 34s -- "$ORACLE_JOB" "$log" 0.2 \
  2>"$E2E_TMP/waiter.err" &
waiter=$!
remember_pid "$waiter"

job_status holder_status 40 "$holder"
assert_eq "a holder busy for longer than its idle limit keeps the lock (exit 0)" 0 "$holder_status"
job_status waiter_status 60 "$waiter"
assert_eq "a waiter whose idle session the server ended still runs once due (exit 0)" 0 "$waiter_status"
check "the waiter slept until due" grep -q -- "sleeping until due" "$E2E_TMP/waiter.err"
# How long it slept: "due in 15.9s: sleeping until due". At least a second past the idle limit,
# or this run did not test what it is for.
slept_ms=$(sed -n 's/.*due in \([0-9.]*\)s: sleeping until due.*/\1/p' "$E2E_TMP/waiter.err" |
  awk '{ printf "%d", $1 * 1000 }')
assert_between "the waiter slept past the 11 s idle limit" 12000 40000 "${slept_ms:-0}"
oracle_check "holder and waiter ran one after the other" "$log" 2
if [ "$holder_status" != 0 ] || [ "$waiter_status" != 0 ]; then
  echo "--- holder stderr"; cat "$E2E_TMP/holder.err"
  echo "--- waiter stderr"; cat "$E2E_TMP/waiter.err"
  echo "--- oracle log"; cat "$log"
fi
finish

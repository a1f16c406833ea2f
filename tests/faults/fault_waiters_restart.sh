#!/usr/bin/env bash
# -w rides out a server restart. First, four waiters on one key start while the server is
# down (their very first connect fails), the server comes back 3 s later on the same port,
# and every waiter runs its command exactly once, never two at a time; their -v output names
# the connection error, but not once per retry. Then a waiter already connected and waiting
# (for --min-interval to pass) sees the server restart under it and still runs when due.
source "$(dirname "$0")/lib.sh"
server_control_required

log=$E2E_TMP/log
: >"$log"
k=$(key restart)
waiters=4

server_ctl stop-server
mark down
start_waiters "$waiters" "$k" "$log"
sleep 3
server_ctl start-server
mark up
echo "server down for $(($(figure up) - $(figure down))) ms"

expect_waiters_ran "after the restart"
for i in $(seq "$waiters"); do
  retries=$(grep -c 'retrying until the wait ends' "$E2E_TMP/w$i.out")
  assert_between "waiter $i: -v says it retries, but not once per attempt ($retries lines)" 1 3 "$retries"
done
oracle_check "every waiter ran once, one at a time" "$log" "$waiters"
echo "first run started $(first_start_after "$log" up) after the server was back"

log2=$E2E_TMP/log2
: >"$log2"
k2=$(key connected)
assert_status "a first run of the second key" 0 dblock run --min-interval 10s "$k2" -- "$ORACLE_JOB" "$log2" 0.1
dblock -v run -w 60 --min-interval 10s --ttl 6s --kill-after 1s "$k2" -- "$ORACLE_JOB" "$log2" 0.1 \
  >"$E2E_TMP/connected.out" 2>&1 &
waiter=$!
remember_pid "$waiter"
check "the waiter is connected and waiting for --min-interval" \
  wait_for 10 grep -qs 'sleeping until due' "$E2E_TMP/connected.out"
server_ctl restart 3
status=0
wait "$waiter" || status=$?
assert_eq "a waiter whose connection died in the restart runs when due" 0 "$status"
[ "$status" = 0 ] || sed 's/^/    /' "$E2E_TMP/connected.out"
oracle_check "the first run and the waiter, one at a time" "$log2" 2
finish

#!/usr/bin/env bash
# cells: postgres:(lease|advisory|for-update|txn-insert)|mysql:(lease|for-update|txn-insert)
# The handoff at a distance (README, Benchmarks; dblock(1) NOTES, Round trips): with the server
# a long round trip R away (scripts/bench/delay_proxy.py on 127.0.0.1), a `run -w` waiter's
# command starts within these many round trips of the holder's command ending. What each needs
# at the least: a waiter blocked in the server on the lock itself only hears that it got it:
# 1 R. A lease waiter at the head of the key's queue is blocked so too, on its holder's handoff
# lock, with its take sent behind that wait (the release lets the lock go in its own round
# trip, and the take runs at once): 1 R, where hearing the release's NOTIFY and then taking
# the row was 2 R. The advisory bound is that plus one round trip, for the processes' own time
# on a loaded machine: a step more on the path (a statement before the command starts, as a
# lease waiter's UNLISTEN and queue place were) fails it. The lease's is 1.5 R. Both waits in
# the server end with core's slice (500 ms) and are sent again a round trip later, and a
# release that reaches the server in between costs up to 2 R (an advisory handoff of 408 ms
# failed so, once in a whole suite); so the test lets the holder go just after the waiter's
# wait began (pg_stat_activity, on the server directly), as a release
# at any other moment of that wait would be. R is long (200 ms) so that the machine's own
# milliseconds stay well within it.
# for-update and txn-insert: the holder's release runs in its own transaction with the COMMIT
# that ends it (one way to the server, where the release row and the lock's end are one); the
# waiter's token is numbered on its other connection by a statement sent with its lock statement,
# behind a wait in the server that the grant ends (lock.row_numbered, which proves the grant
# itself; only at a distance: a round trip of 1 ms or more, timed once a first try without
# waiting found the key busy),
# and the waiter hears both (the way back): 1 R, where hearing the grant and then
# numbering was 2 R (and releasing the row on the other connection first, 3 R). Their bound is
# the lease's, 1.5 R. The holder goes just after the waiter's first wait began: the one a short
# job's release falls in, and the one a waiter that timed its round trip only once a slice had
# ended did not chain.
# MariaDB's lease (mysql:lease): the waiter at the head of the key's queue sends its take behind
# a wait for the holder's wake name (GET_LOCK), in one block; the release gives the name back
# in its round trip and the take runs at once: 1 R, where hearing the wake and then taking was
# 2 R. Its bound is the PostgreSQL lease's, 1.5 R, for the same reason.
# MariaDB's for-update and txn-insert (their row locks wait in whole seconds only): the waiter at
# the head of the key's queue sends its lock statement behind a wait for the holder's wake name,
# in one block on its lock session; the holder's end gives the row back and then the name, and
# the lock statement runs at once; its numbering goes on its other connection with it, behind a
# wait for a gate that the lock session lets go right after its lock statement
# (lock.row_numbered, proven by the holder tag the lock statement takes; at a distance, as
# PostgreSQL's): the wake with the lock's answer and the numbering's, 1 R, where hearing the
# wake and locking, then numbering was 2 (and hearing, locking, numbering 3). Their bound is
# PostgreSQL's, 1.5 R; the holder goes just after that wait began, as for the lease.
source "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || skip_or_fail "no python3 for the delay proxy"
delay_ms=100
rtt_ms=$((2 * delay_ms))
case $DBLOCK_STRATEGY in
  lease) rtts=1.5 ;;             # the handoff lock, the take behind it
  advisory) rtts=2 ;;            # blocked in pg_advisory_lock
  for-update | txn-insert) rtts=1.5 ;;  # blocked on the row (or its queue), the numbering behind it
esac

target_port=$(python3 -c 'import sys, urllib.parse; u = urllib.parse.urlsplit(sys.argv[1]); print(u.port or {"mysql": 3306}.get(u.scheme, 5432))' "$DBLOCK_DSN")
python3 "$DBLOCK_SOURCE_DIR/scripts/bench/delay_proxy.py" --target-port "$target_port" --delay-ms "$delay_ms" \
  --port-file "$E2E_TMP/proxy.port" --lifetime 200 >/dev/null &
proxy_pid=$!
remember_pid "$proxy_pid"
wait_for 10 test -s "$E2E_TMP/proxy.port" || { fail "the delay proxy did not start"; finish; }
# Through the proxy, without TLS (its handshake would only make the test longer).
DBLOCK_DSN=$(plain_dsn_via "$(cat "$E2E_TMP/proxy.port")")
export DBLOCK_DSN

k=$(key distance)
d=$E2E_TMP/handoff
mkdir -p "$d"
# The holder's command holds until the test lets it go, then writes when it ended. Its lease is
# long (a renew every 20 s): the default's renew at 10 s falls when the test lets the holder go
# (its waits add up to about 10 s on a loaded machine), and a release waits for a renew's round
# trip on the same connection, one round trip more (572 and 580 ms where 420 is usual, in CI and
# under load; the delay proxy's log showed the holder's renew sent 41 ms before its command ended).
start_bg holder dblock run "$k" --ttl 60s -- sh -c "while [ ! -e '$d/go' ]; do sleep 0.005; done; date +%s%N >'$d/end'"
wait_for 30 is_held "$k" || fail "the holder did not take $k"
start_bg waiter dblock -v run -w 60s "$k" -- sh -c "date +%s%N >'$d/start'" 2>"$d/waiter.err"
# It waits once it said the key is held; then a few round trips more, for a lease waiter's
# place in the key's queue and its LISTEN.
# PostgreSQL's row-lock waiter is let go in its first wait, as a short job's holder would be: a
# waiter that timed its round trip only once a first slice had ended, and so numbered after
# that slice's grant, took 2 R there (scripts/bench.sh's handoff at 10 ms).
first_wait=""
[ "$DBLOCK_TEST_BACKEND" = postgres ] && [ "$DBLOCK_STRATEGY" = for-update -o "$DBLOCK_STRATEGY" = txn-insert ] && first_wait=1
if [ -z "$first_wait" ]; then
  wait_for 30 grep -q " is held" "$d/waiter.err" || fail "the waiter never said it waits: $(tail -n 1 "$d/waiter.err")"
  sleep "$(awk -v r="$rtt_ms" 'BEGIN { printf "%.2f", 6 * r / 1000 }')"
fi
# waiting_in_server LIKE: a statement of the waiter's matching LIKE has just begun a wait for a
# lock in the server (within 60 ms), polled for up to 1.5 s. The waiter's: its connection comes
# from this test's proxy (its ports towards the server), as another test's waiter in parallel
# does not (a lease's wait names no table of this test's).
command -v ss >/dev/null || skip_or_fail "no ss (iproute2) to find the proxy's connections"
waiting_in_server() {
  local began="" _ ports
  for _ in $(seq 150); do
    ports=$(ss -Htnp state established "( dport = :$target_port )" | grep "pid=$proxy_pid," |
      awk '{ n = split($3, a, ":"); printf "%s%s", sep, a[n]; sep = "," }')
    began=$(server_sql "SELECT 1 FROM pg_stat_activity WHERE state = 'active' AND wait_event_type = 'Lock'
      AND client_port IN (${ports:-0}) AND query LIKE '$1'
      AND clock_timestamp() - query_start < interval '60 ms' LIMIT 1")
    [ -n "$began" ] && return 0
    sleep 0.01
  done
  return 1
}
# my_waiting_in_server LIKE: a MariaDB session of this database has just begun a wait in
# GET_LOCK in a statement matching LIKE (a waiter's wait for the key's wake name: wake.wait, or
# wake.wait_ahead with its take or lock statement behind it), within 60 ms, polled for up to
# 1.5 s.
my_waiting_in_server() {
  local began="" _
  for _ in $(seq 150); do
    began=$(server_sql "SELECT 1 FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND ID <> CONNECTION_ID()
      AND STATE LIKE '%user lock%' AND INFO LIKE '$1' AND TIME_MS < 60 LIMIT 1")
    [ -n "$began" ] && return 0
    sleep 0.01
  done
  return 1
}
if [ "$DBLOCK_TEST_BACKEND" = mysql ]; then
  # The head waiter's take (lease) or lock statement (for-update, txn-insert) waits behind its
  # wait for the holder's wake name: the holder goes once that wait has just begun (a slice's,
  # as for PostgreSQL's lease). A block, whose statement the server shows with its values, this
  # key's wake name among them (another test's waiter, in parallel, is not this one's;
  # mysql_names.cpp, wake_name).
  my_waiting_in_server "%IS_USED_LOCK%dblock-wake:$(server_sql "SELECT LEFT(SHA2(CONCAT(DATABASE(), CHAR(0),
    '$DBLOCK_TABLE_PREFIX', CHAR(0), '$k'), 256), 52)" | tail -n 1)%" ||
    fail "the $DBLOCK_STRATEGY waiter never waited in the server for the holder's wake name, its lock statement behind"
elif [ "$DBLOCK_STRATEGY" = lease ]; then
  # The head waiter's take waits behind its wait for the holder's handoff lock, a statement of
  # its own (dblock(1) NOTES, Round trips): the holder goes once that wait has just begun. Its
  # parameter is typed by the connection (int8), not cast in the text.
  waiting_in_server 'SELECT (SELECT true FROM (SELECT pg_advisory_lock($1)) w) AS got FROM %' ||
    fail "the lease waiter never waited in the server for the holder's handoff lock"
elif [ "$DBLOCK_STRATEGY" = advisory ]; then
  # Its numbered take blocks in pg_advisory_lock in slices, as the lease's wait does: the holder
  # goes once a slice has just begun (the take's text, not a queue's wait).
  waiting_in_server '%pg_advisory_lock(%INSERT INTO%' ||
    fail "the advisory waiter never waited in the server for the key's lock"
else
  # The waiter's lock statement (the claims row, or txn-insert's queue ahead of it) has just
  # begun its first wait (its slice is 500 ms): watched in the server itself, every 5 ms, its
  # statistics snapshot cleared each time (a psql a poll, as above, can take longer than the
  # window on a loaded machine), for up to 30 s. The table prefix is this test's own. Still in
  # its first wait when the holder goes: the waiter has not yet said the key is held (it says so
  # once a wait ended without the lock).
  server_sql "DO \$\$ BEGIN FOR i IN 1..6000 LOOP PERFORM pg_stat_clear_snapshot(); IF EXISTS (SELECT 1
    FROM pg_stat_activity WHERE state = 'active' AND wait_event_type = 'Lock'
    AND query LIKE '%${DBLOCK_TABLE_PREFIX}claims%' AND clock_timestamp() - query_start < interval '60 ms') THEN
    RETURN; END IF; PERFORM pg_sleep(0.005); END LOOP; RAISE EXCEPTION 'no wait'; END \$\$" >/dev/null ||
    fail "the $DBLOCK_STRATEGY waiter never waited in the server for the key's row"
  ! grep -q " is held" "$d/waiter.err" || fail "the test saw a later wait of the waiter's, not its first"
fi
touch "$d/go"
wait_exit hs "$holder" 60
wait_exit ws "$waiter" 60
assert_eq "the holder exits 0" 0 "$hs"
assert_eq "the waiter exits 0" 0 "$ws"
if [ -s "$d/end" ] && [ -s "$d/start" ]; then
  gap=$((($(cat "$d/start") - $(cat "$d/end")) / 1000000))
  echo "      handoff ${gap} ms at a ${rtt_ms} ms round trip (bound ${rtts} round trips)"
  assert_between "the waiter's command starts after the holder's ended, within $rtts round trips of ${rtt_ms} ms" \
    1 "$(awk -v n="$rtts" -v r="$rtt_ms" 'BEGIN { printf "%d", n * r }')" "$gap"
else
  fail "a command did not run"
fi
finish

#!/usr/bin/env bash
# A PostgreSQL row-lock waiter sends its numbering with its lock statement from its second slice
# on (lock.row_numbered, on its bookkeeping session, behind a wait in the server for a gate that
# its lock session lets go once the lock is granted: dblock(1) NOTES, Round trips). The gate also
# opens when the lock session ends and when a slice of the wait ends without the lock, and the
# numbering must then number nothing: it proves the grant itself. Each case: a holder runs the
# oracle job; a waiter waits long enough (slices of 500 ms) to send its numbering that way; the
# fault hits the waiter; while the holder still runs, the key's row must still carry the
# holder's token (nothing numbered over a live holder); at the end no two runs overlapped and
# tokens increase.
source "$(dirname "$0")/lib.sh"

s=$DBLOCK_STRATEGY
[ "$DBLOCK_TEST_BACKEND" = postgres ] || skip_or_fail "PostgreSQL's row-lock numbering only"

row_token() { server_sql "SELECT token FROM ${DBLOCK_TABLE_PREFIX}locks WHERE name = '$1'"; }
# The client ports of process PID's TCP connections, as a SQL list: its sessions, told apart
# from those of the other tests running at the same time.
ports_of() {
  ss -tnpH state established 2>/dev/null |
    awk -v p="pid=$1," 'index($0, p) { n = split($3, a, ":"); printf "%s%s", (k++ ? "," : ""), a[n] }'
}
# waiter_session PID LIKE: the session of the waiter PID waiting for a lock in a statement
# matching LIKE.
waiter_session() {
  local ports
  ports=$(ports_of "$1")
  [ -n "$ports" ] || return 0
  server_sql "SELECT pid FROM pg_stat_activity WHERE client_port IN ($ports) AND wait_event_type = 'Lock'
    AND query LIKE '$2' LIMIT 1"
}
# The waiter's lock session (a statement on the claims table) and its bookkeeping session
# (waiting for the gate).
lock_session() { waiter_session "$1" "%${DBLOCK_TABLE_PREFIX}claims%"; }
book_session() { waiter_session "$1" 'SELECT pg_advisory_xact_lock_shared%'; }
terminate() { [ "$(server_sql "SELECT pg_terminate_backend($1)")" = t ]; }

# one_case NAME FAULT: the holder (6 s), the waiter, FAULT (a function, given the waiter's pid)
# once the waiter is past its first slice, the row checked while the holder holds.
one_case() {
  local name=$1 fault=$2 k log w rc i t
  k=$(key "numbering-$name")
  log=$E2E_TMP/$name.log
  if ! start_job_holder "$k" "$log" 6; then
    fail "$s $name: the holder never started"
    return
  fi
  dblock run "$k" -w 30 -- "$ORACLE_JOB" "$log" 0.2 2>"$E2E_TMP/$name.err" &
  w=$!
  remember_pid $w
  sleep 1.3  # past the waiter's first slice: its numbering goes with its lock statement
  check "$s $name: the fault hit the waiter" "$fault" "$w"
  t=$token
  for i in 1 2 3 4; do  # over the slices that follow, while the holder holds
    sleep 0.3
    # The holder's job writes its end before its release: not ended before the row is read, it
    # still held while it was read (a row numbered after its end is no fault).
    grep -q "^end $token " "$log" && break
    t=$(row_token "$k")
    [ "$t" = "$token" ] || break
  done
  assert_eq "$s $name: the row still carries the holder's token while it holds" "$token" "$t"
  kill -CONT "$w" 2>/dev/null
  wait "$holder"
  wait "$w"
  rc=$?
  assert_eq "$s $name: the waiter ran once the holder was done" 0 "$rc"
  [ "$rc" = 0 ] || sed 's/^/    | waiter: /' "$E2E_TMP/$name.err"
  oracle_check "$s $name: no overlap, tokens increase" "$log" 2 0
}

# The waiter's lock session ended by the server in the middle of a slice's wait (gate let go
# with the session).
kill_waiting() {
  local pid
  pid=$(lock_session "$1")
  [ -n "$pid" ] && terminate "$pid"
}
# The waiter's process stalls; its slice ends in lock_timeout, the unlock of the gate skipped
# with the failed statement; its session sits idle in the failed transaction, holding the gate,
# until the server's idle limit ends it (idle_in_transaction_session_timeout does that: here
# pg_terminate_backend once it is idle).
idle_killed() {
  local pid _ state=""
  pid=$(lock_session "$1")
  [ -n "$pid" ] || return 1
  kill -STOP "$1"
  for _ in $(seq 100); do
    state=$(server_sql "SELECT state FROM pg_stat_activity WHERE pid = $pid")
    [ "$state" = "idle in transaction (aborted)" ] && break
    sleep 0.02
  done
  [ "$state" = "idle in transaction (aborted)" ] && terminate "$pid" && sleep 0.3
  kill -CONT "$1"
  [ "$state" = "idle in transaction (aborted)" ]
}
# Slices end in lock_timeout while the holder holds: nothing but a look at the row.
slices_end() { [ -n "$(lock_session "$1")" ]; }
# The numbering statement fails: its session is ended while it waits for the gate.
book_killed() {
  local pid
  pid=$(book_session "$1")
  [ -n "$pid" ] && terminate "$pid"
}

one_case waiting-session-killed kill_waiting
one_case idle-session-killed idle_killed
one_case slices-end slices_end
one_case numbering-failed book_killed
finish

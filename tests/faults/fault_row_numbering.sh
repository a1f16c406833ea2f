#!/usr/bin/env bash
# A row-lock waiter at a distance (its bookkeeping session's round trip 1 ms or more) sends its
# numbering with its lock statement from its second slice on (lock.row_numbered, on its
# bookkeeping session, behind a wait in the server for a gate that its lock session lets go once
# the lock is granted: dblock(1) NOTES, Round trips). PostgreSQL's gate is an advisory lock,
# MariaDB's a named lock (GET_LOCK) given back in the lock statement's block. The gate also
# opens when the lock session ends and when a slice of the wait ends without the lock, and the
# numbering must then number nothing: it proves the grant itself (PostgreSQL's lock table;
# MariaDB's holder tag, which the lock statement takes with the row). Each case: a holder runs
# the oracle job; a waiter, 10 ms away (scripts/bench/delay_proxy.py on 127.0.0.1), waits long
# enough (slices of 500 ms) to send its numbering that way; the fault hits the waiter; while the
# holder still runs, the key's row must still carry the holder's token (nothing numbered over a
# live holder); at the end no two runs overlapped and tokens increase. A waiter on loopback
# numbers once it heard the grant, as before: it never waits for the gate.
# MariaDB's run that does not wait (its first attempt) sends its numbering with its lock
# statement too, no gate ahead of it, behind a wait for the proof (lock.grant_wait): first-busy
# and first-free below hold it to the same oracle at a distance.
source "$(dirname "$0")/lib.sh"

s=$DBLOCK_STRATEGY
b=$DBLOCK_TEST_BACKEND
case $b in
  postgres | mysql) ;;
  *) skip_or_fail "a server's row-lock numbering only" ;;
esac

command -v python3 >/dev/null || skip_or_fail "no python3 for the delay proxy"
command -v ss >/dev/null || skip_or_fail "no ss (iproute2) to find the waiter's sessions"
target_port=$(python3 -c 'import sys, urllib.parse; u = urllib.parse.urlsplit(sys.argv[1]); print(u.port or {"mysql": 3306}.get(u.scheme, 5432))' "$DBLOCK_DSN")
python3 "$DBLOCK_SOURCE_DIR/scripts/bench/delay_proxy.py" --target-port "$target_port" --delay-ms 5 \
  --port-file "$E2E_TMP/proxy.port" --lifetime 300 >/dev/null &
proxy=$!
remember_pid "$proxy"
wait_for 10 test -s "$E2E_TMP/proxy.port" || { fail "the delay proxy did not start"; finish; }
far_dsn=$(plain_dsn_via "$(cat "$E2E_TMP/proxy.port")")

# The key's row: its token and when it was numbered (epoch ms, the server's clock: this machine's).
row_token() {
  case $b in
    postgres) server_sql "SELECT token || ' ' || (extract(epoch FROM acquired_at) * 1000)::bigint
      FROM ${DBLOCK_TABLE_PREFIX}locks WHERE name = '$1'" ;;
    mysql) server_sql "SELECT CONCAT(token, ' ', TIMESTAMPDIFF(MICROSECOND, '1970-01-01', acquired_at) DIV 1000)
      FROM ${DBLOCK_TABLE_PREFIX}locks WHERE name = '$1'" ;;
  esac
}
# The client ports of process PID's TCP connections, as a SQL list: its sessions, told apart
# from those of the other tests running at the same time.
ports_of() {
  ss -tnpH state established 2>/dev/null |
    awk -v p="pid=$1," 'index($0, p) { n = split($3, a, ":"); printf "%s%s", (k++ ? "," : ""), a[n] }'
}
# waiter_session PID LIKE: the session of the waiter PID running a statement matching LIKE
# (PostgreSQL: waiting for a lock; a waiter at a distance: the proxy's sessions, one waiter's at
# a time).
waiter_session() {
  local ports
  ports=$(printf '%s,%s' "$(ports_of "$1")" "$(ports_of "$proxy")" | sed 's/^,//; s/,$//')
  [ -n "$ports" ] || return 0
  case $b in
    postgres) server_sql "SELECT pid FROM pg_stat_activity WHERE client_port IN ($ports) AND wait_event_type = 'Lock'
      AND query LIKE '$2' LIMIT 1" ;;
    mysql) server_sql "SELECT ID FROM information_schema.PROCESSLIST WHERE SUBSTRING_INDEX(HOST, ':', -1) IN ($ports)
      AND INFO LIKE '$2' LIMIT 1" ;;
  esac
}
# The waiter's lock session (PostgreSQL: a statement on the claims table; MariaDB: its block's
# wait for the holder's wake name, the statement of a block the server shows) and its
# bookkeeping session (waiting for the gate: lock.gate_wait, which gives it back once it had it;
# MariaDB's numbering block starts with that wait).
# Both look for up to 2 s (session_within): between two slices the waiter sends its next
# statements, and on a loaded machine that gap grew long enough for one look to miss the wait
# (the fault's "hit the waiter" check failed 1 run in 5 with both cores busy; the bookkeeping
# session's look, a single one until then, failed on CI's slow host and 1 run in 4 here with
# two busy loops beside -j2).
session_within() {
  local _ pid
  for _ in $(seq 40); do
    pid=$(waiter_session "$1" "$2")
    [ -n "$pid" ] && break
    sleep 0.05
  done
  echo "$pid"
}
lock_session() {
  case $b in
    postgres) session_within "$1" "%${DBLOCK_TABLE_PREFIX}claims%" ;;
    mysql) session_within "$1" "%THEN GET_LOCK(_dblock-wake:%" ;;
  esac
}
case $b in
  postgres) book_like='SELECT got, pg_advisory_unlock(%' ;;
  mysql) book_like='SELECT GET_LOCK(_dblock-gate:%' ;;
esac
book_session() { session_within "$1" "$book_like"; }
terminate() {
  case $b in
    postgres) [ "$(server_sql "SELECT pg_terminate_backend($1)")" = t ] ;;
    mysql) server_sql "KILL CONNECTION $1" ;;
  esac
}
# Whether session ID sits idle in a transaction whose statement failed (MariaDB: idle).
idle_aborted() {
  case $b in
    postgres) [ "$(server_sql "SELECT state FROM pg_stat_activity WHERE pid = $1")" = "idle in transaction (aborted)" ] ;;
    mysql) [ "$(server_sql "SELECT COMMAND FROM information_schema.PROCESSLIST WHERE ID = $1")" = Sleep ] ;;
  esac
}

# one_case NAME FAULT [DSN]: the holder (6 s), the waiter (through DSN, the proxy's by default),
# FAULT (a function, given the waiter's pid) once the waiter is past its first slice, the row
# checked while the holder holds. FAULT returns 2 when the waiter did not meet the case's premise
# for a reason of the moment (a loaded machine's loopback timed as a distance): the waiter is
# stopped and the case begins again with a new key, holder and waiter, three times at most.
one_case() {
  local name=$1 fault=$2 dsn=${3:-$far_dsn} k log w rc i t at ended hit try=1
  while :; do
    k=$(key "numbering-$name.$try")
    log=$E2E_TMP/$name.$try.log
    if ! start_job_holder "$k" "$log" 6; then
      fail "$s $name: the holder never started"
      return
    fi
    DBLOCK_DSN=$dsn dblock run "$k" -w 30 -- "$ORACLE_JOB" "$log" 0.2 2>"$E2E_TMP/$name.err" &
    w=$!
    remember_pid $w
    sleep 1.3  # past the waiter's first slice: its numbering goes with its lock statement
    hit=0
    "$fault" "$w" || hit=$?
    [ "$hit" = 2 ] && [ "$try" -lt 3 ] || break
    echo "    | $name: the waiter's premise did not hold (attempt $try); a new key, holder and waiter" >&2
    kill "$w" 2>/dev/null
    wait "$w" "$holder"
    try=$((try + 1))
  done
  if [ "$hit" = 0 ]; then pass "$s $name: the fault hit the waiter"; else fail "$s $name: the fault hit the waiter"; fi
  t=$token
  for i in 1 2 3 4; do  # over the slices that follow, while the holder holds
    sleep 0.3
    grep -q "^end $token " "$log" && break
    read -r t at <<<"$(row_token "$k")"
    [ "$t" = "$token" ] && continue
    # The holder's job writes its end before its release: a row numbered after that end is no
    # fault (a loaded machine's read can come that late).
    ended=$(awk -v t="$token" '$1 == "end" && $2 == t { print int($3 / 1000000); exit }' "$log")
    [ -n "$ended" ] && [ "${at:-0}" -ge "$ended" ] && t=$token
    break
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
# until the server's idle limit ends it (idle_in_transaction_session_timeout, MariaDB's
# wait_timeout, does that: here the session is ended once it is idle).
idle_killed() {
  local pid _ idle=1
  pid=$(lock_session "$1")
  [ -n "$pid" ] || { echo "    | the waiter's lock session was not in its wait" >&2; return 1; }
  kill -STOP "$1"
  for _ in $(seq 100); do
    idle_aborted "$pid" && { idle=0; break; }
    sleep 0.02
  done
  [ "$idle" = 0 ] && terminate "$pid" && sleep 0.3
  kill -CONT "$1"
  [ "$idle" = 0 ] || echo "    | the stopped waiter's lock session never sat idle in its failed slice" >&2
  [ "$idle" = 0 ]
}
# Slices end in lock_timeout while the holder holds: nothing but a look at the row.
slices_end() { [ -n "$(lock_session "$1")" ]; }
# The numbering statement fails: its session is ended while it waits for the gate.
book_killed() {
  local pid
  pid=$(book_session "$1")
  [ -n "$pid" ] && terminate "$pid"
}

# On loopback: slices end, the numbering never waits for the gate (looked for over three).
# A waiter chains where its round trip, timed once after its first wait, took 1 ms or more
# (session_locker.cpp, chain_from): with both cores busy and the servers starved, 1 loopback
# waiter in 28 timed that much (a real distance at that moment, not a fault of the
# timing), so a chained waiter returns 2 and the case tries a new one; three in a row fail.
not_chained() {
  local _
  [ -n "$(lock_session "$1")" ] || { echo "    | the waiter's lock session was not in its wait" >&2; return 1; }
  for _ in $(seq 30); do
    [ -z "$(waiter_session "$1" "$book_like")" ] || { echo "    | the waiter's bookkeeping session waited for the gate (chained)" >&2; return 2; }
    sleep 0.05
  done
}

# A run's first attempt (no wait) at a distance: where the dialect can (MariaDB), its numbering
# goes out with its lock statement, no gate ahead of it, and waits in the server for its proof
# (lock.row_numbered's :poll_ms). A key held by another: the run is refused (75) and its
# numbering must number nothing (the holder's token stays on the row). A free key, the row made
# by an earlier run and not: each run numbers once, the tokens increase, no overlap.
first_busy() {
  local k log t rc=0 i
  k=$(key "numbering-first-busy")
  log=$E2E_TMP/first-busy.log
  # The holder's job is ended (SIGTERM, oracle_job.sh) once the three runs are done: with both
  # cores busy, three PostgreSQL runs at a distance and their looks at the row outlasted a job of
  # 3 s, and the third found the key free (PostgreSQL txn-insert, 2 loops of 2).
  if ! start_job_holder "$k" "$log" 60; then
    fail "$s first-busy: the holder never started"
    return
  fi
  for i in 1 2 3; do
    rc=0
    DBLOCK_DSN=$far_dsn dblock run "$k" -- "$ORACLE_JOB" "$log" 0.1 2>>"$E2E_TMP/first-busy.err" || rc=$?
    assert_eq "$s first-busy: a run at a distance on a held key is refused ($i)" 75 "$rc"
    read -r t _ <<<"$(row_token "$k")"
    assert_eq "$s first-busy: the row still carries the holder's token ($i)" "$token" "$t"
  done
  kill -TERM "$(awk '$1 == "start" { print $4; exit }' "$log")"
  wait "$holder"
  oracle_check "$s first-busy: no overlap, tokens increase" "$log" 1 0
}
first_free() {
  local k log rc i ok=0
  k=$(key "numbering-first-free")
  log=$E2E_TMP/first-free.log
  for i in 1 2 3 4; do
    rc=0
    DBLOCK_DSN=$far_dsn dblock run "$k" -- "$ORACLE_JOB" "$log" 0.05 2>>"$E2E_TMP/first-free.err" || rc=$?
    [ "$rc" = 0 ] && ok=$((ok + 1))
  done
  assert_eq "$s first-free: every run at a distance on a free key ran" 4 "$ok"
  oracle_check "$s first-free: no overlap, tokens increase" "$log" 4 0
}

first_busy
first_free
one_case loopback-not-chained not_chained "$DBLOCK_DSN"
one_case waiting-session-killed kill_waiting
one_case idle-session-killed idle_killed
one_case slices-end slices_end
one_case numbering-failed book_killed
finish

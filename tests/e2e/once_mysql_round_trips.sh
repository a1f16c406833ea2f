#!/usr/bin/env bash
# What one `dblock run KEY -- true` costs a MySQL/MariaDB server, per strategy, counted by a
# proxy of our own in front of it (tests/e2e/mysql_count_proxy.py) so tests running in
# parallel on the same server do not disturb the figures: connections opened, and the
# commands sent after each handshake and the round trips they took. The key has run once
# before, so the tables and its row exist (the measured run is the common case).
#   lease: one connection; no session settings (a lease run's renewals keep its session busy),
#          the take, which on MariaDB reads the failover record (the lock-delay's gate) itself,
#          answers with its row and takes the key's wake name (no read of the record, of the
#          taken row, no wake statement), and the release: on MariaDB one block of statements
#          (BEGIN NOT ATOMIC) that releases, writes the history row and trims it in one
#          transaction, commits, and gives the wake name back: 2 round trips, 2 statements (it
#          was 6: the record's read, the take, START TRANSACTION, the update, the history row,
#          its oldest token, and a COMMIT sent with the goodbye). MySQL 8 has no such block: 8.
#   advisory: one connection, which holds the lock and does the bookkeeping (GET_LOCK outlives
#          every commit): on MariaDB one block of statements (BEGIN NOT ATOMIC) that sets the
#          holder's idle limits, reads the failover record (which also says whether a session
#          lock can hold there: no Galera node, the session the handshake gave; locked shared
#          with the take, which does not wait) and then takes the lock and numbers the row in one
#          statement (RETURNING answers with the token); a take that may wait has the record
#          read apart first, once per connection; and the release: one block that releases the
#          row, writes the history row with its trim in one transaction, commits and then gives
#          the lock back (MySQL 8: the record's read, the lock, the token's upsert and its read,
#          the row released and the lock given back in one statement, the idle limit apart,
#          then START TRANSACTION, the history row, its oldest token, COMMIT): 2 (it was 3 with
#          the record's read apart, 5 with the idle limit and the history row apart, 8 with the
#          history row's four round trips, 11 with a second connection).
#   for-update, txn-insert: two connections (the lock's session and one for bookkeeping), opened
#          side by side: the server lock, with the lock session's settings ahead of it in one
#          block (BEGIN NOT ATOMIC), and txn-insert's INSERT ahead of its holder tag, which
#          takes the key's wake name with it (for-update's lock statement takes both); the
#          bookkeeping upsert, with that session's idle limits ahead of it, which reads the
#          failover record itself (and whether a session lock can hold there: no Galera node,
#          the session the handshake gave), answers with its token and gives the key's queue
#          name back; and the release: one block in the holder's own transaction that releases
#          the row, writes the history row with its trim, commits (which lets the lock go) and
#          gives the holder tag and the key's wake name back: 3 and 3, the lock statement and the
#          numbering side by side on the two connections on MariaDB (2 on the path: timed at a
#          distance at the end; a busy key's holder row read by the numbering's wait; they were 6 and 7 with
#          both sessions' settings in round trips of their own, the record's read apart and
#          txn-insert's tag apart, 9 and 10 with the token's read, the release's row and the
#          session's end apart, 12 and 13 before). MySQL 8 has no blocks and no RETURNING: the
#          settings as the connection's init command, the record's read, the token read back,
#          the release's row, ROLLBACK RELEASE and the history row apart. The holder's session
#          runs without autocommit, so its lock statement opens the transaction.
#   waiters (lease, for-update): 16 waiters on a held key, from the holder's release until the
#          last of them is done, at most 15 (lease) or 31 (for-update) statements each: a
#          release wakes one waiter, not all of them.
#   acquire, renew, release, status: one connection each and at most the round trips dblock(1)
#          gives (NOTES, Round trips); `release` of another process's holder gives back no
#          wake name, which only the holder's session holds (it was 5 with that statement).
# Each bound is today's count on MariaDB (what the suite's server is): a cut is welcome, a creep
# fails.
source "$(dirname "$0")/lib.sh"

mysql_count_proxy 200 || { fail "the counting proxy did not start"; finish; }

# count NAME: the named figure from the proxy's counts (0 when absent).
count() {
  local v
  v=$(tr ' ' '\n' <"$E2E_TMP/counts" | sed -n "s/^$1=//p")
  echo "${v:-0}"
}
# The proxy counts a command before passing it on, and a round trip when the reply comes,
# before passing that on; a reply the client never read (a last COMMIT not waited for) comes
# off when the client's connection ends. So a command's counts are final once the proxy has
# seen the connections it opened end: settled C0 K0 waits for that (C0, K0: the connections
# opened and closed before it).
snapshot() { echo "$(count connections) $(count round_trips) $(count COM_QUERY) $(count COM_STMT_EXECUTE) $(count closed)"; }
ended_since() { [ $(($(count closed) - $2)) -ge $(($(count connections) - $1)) ]; }
settled() { wait_for 5 ended_since "$1" "$2" || echo "      (the proxy still sees a connection of the command open)"; }

for strategy in lease advisory for-update txn-insert; do
  key="rt-$strategy"
  assert_status "$strategy: a first run creates the tables and the key's row" 0 \
    dblock -d "$proxied" --strategy "$strategy" run "$key" -- true
  read -r c0 r0 q0 e0 k0 <<<"$(snapshot)"
  # The first run made the tables: its statements that found none were closed then.
  [ "$strategy" != lease ] || closes0=$(count COM_STMT_CLOSE)
  assert_status "$strategy: the measured run" 0 dblock -d "$proxied" --strategy "$strategy" run "$key" -- true
  settled "$c0" "$k0"
  read -r c1 r1 q1 e1 _ <<<"$(snapshot)"
  connections=$((c1 - c0)) round_trips=$((r1 - r0)) statements=$((q1 - q0 + e1 - e0))
  echo "      $strategy: connections=$connections round_trips=$round_trips statements=$statements ($(cat "$E2E_TMP/counts"))"
  if [ "$strategy" = lease ]; then
    assert_eq "lease: one connection" 1 "$connections"
    # The take (the failover gate, its row and the wake name with it) and the release (its
    # history row, the trim, the commit and the wake name given back).
    assert_eq "lease: round trips" 2 "$round_trips"
    assert_eq "lease: statements executed" 2 "$statements"
  elif [ "$strategy" = advisory ]; then
    assert_eq "advisory: one connection" 1 "$connections"
    assert_between "advisory: round trips" 1 2 "$round_trips"
  else
    assert_eq "$strategy: two connections" 2 "$connections"
    # As the header says.
    case $strategy in
      for-update) most=3 ;;
      txn-insert) most=3 ;;
    esac
    assert_between "$strategy: round trips" 1 "$most" "$round_trips"
  fi
done
assert_eq "every run is in the history" 8 "$(dblock -d "$DBLOCK_DSN" history --json --limit 100 | json_field runs.#)"

# A run's prepared statements end with its session: none is closed one by one (COM_STMT_CLOSE,
# a packet each) on the way out.
assert_eq "no prepared statement closed on its own at exit" 0 "$(($(count COM_STMT_CLOSE) - closes0))"

# A contender that finds the key held and does not wait (every host but one, each time a farm's
# crontab line fires): exit 75 after the statements that say so and who holds it. The lease's
# take answers with the holder's row; MariaDB advisory's block does too, where it read the row
# in a round trip of its own (2); for-update and txn-insert lock on one connection and read the
# holder on the other.
for strategy in lease advisory for-update txn-insert; do
  key="rt-busy-$strategy"
  d="$E2E_TMP/busy-$strategy"
  mkdir -p "$d"
  start_bg holder dblock -d "$proxied" --strategy "$strategy" run --ttl 120s "$key" -- \
    sh -c 'while [ ! -e "$0" ]; do sleep 0.02; done' "$d/go"
  if ! wait_for 10 is_held "$key"; then
    fail "$strategy busy: the holder never held"
    continue
  fi
  read -r c0 r0 q0 e0 k0 <<<"$(snapshot)"
  rc=0
  dblock -d "$proxied" --strategy "$strategy" run "$key" -- true 2>/dev/null || rc=$?
  settled "$c0" "$k0"
  read -r c1 r1 _ <<<"$(snapshot)"
  touch "$d/go"
  wait_exit hs "$holder" 20
  case $strategy in
    lease | advisory) most=1 ;;
    *) most=2 ;;
  esac
  echo "      $strategy busy: connections=$((c1 - c0)) round_trips=$((r1 - r0))"
  assert_eq "$strategy busy: exits 75" 75 "$rc"
  assert_between "$strategy busy: round trips after the handshakes, at most $most" 1 "$most" "$((r1 - r0))"
done

# The other subcommands, one connection each: their round trips after the handshake, the
# counts dblock(1) gives (NOTES, Round trips). acquire, renew and release are the lease's own.
# sub_bound LABEL TRIPS COMMAND...: runs a dblock subcommand through the proxy: status 0, one
# connection, at most TRIPS round trips (today's count: a cut is welcome, a creep fails).
sub_bound() {
  local label=$1 trips=$2 c0 r0 q0 e0 k0 c1 r1 q1 e1 rc=0
  shift 2
  read -r c0 r0 q0 e0 k0 <<<"$(snapshot)"
  dblock -d "$proxied" "$@" >"$E2E_TMP/sub.out" || rc=$?
  settled "$c0" "$k0"
  read -r c1 r1 q1 e1 _ <<<"$(snapshot)"
  assert_eq "$label: exits 0" 0 "$rc"
  echo "      $label: connections=$((c1 - c0)) round_trips=$((r1 - r0))"
  assert_eq "$label: one connection" 1 "$((c1 - c0))"
  assert_between "$label: round trips after the handshake, at most $trips" 1 "$trips" "$((r1 - r0))"
}
subcommand_bounds 1 5 4 1

# Waiters queue: a release wakes the waiter at the head of the key's queue, not every waiter.
# Woken all at once, each waiter made an attempt (the upsert), read the row and went back to
# waiting at every release, so N waiters cost the server about 3 N^2 / 2 statements from the
# holder's release until the last of them is done; queued, a few per waiter.
n=16
for strategy in lease for-update; do
  # A woken lease waiter: its run's statements (2, as above) and a busy round or so (attempt
  # and wait; a row read where the take does not say why: also every wait slice of 0.5 s);
  # for-update: its own run's 16 (above) and a busy round or two of 5 (START TRANSACTION, the
  # NOWAIT lock, ROLLBACK, the row read, the wait). All woken at every release, each waiter would add about 3
  # statements for every release before its own (24 each for 16 waiters).
  # Every waiter also spends a few statements on each server wait slice (0.5 s) it sits
  # through, and a loaded machine makes the handoffs, so the slices, longer: the bound grows by
  # those per slice of the time measured. Woken all at once instead, 16 waiters would add about
  # 360 statements, which these bounds still catch while the last waiter is done within 2 s.
  case $strategy in
    lease) most=8 per_slice=3 ;;
    for-update) most=26 per_slice=5 ;;
  esac
  key="queue-$strategy"
  d="$E2E_TMP/queue-$strategy"
  mkdir -p "$d"
  start_bg holder dblock -d "$proxied" --strategy "$strategy" run "$key" -- \
    sh -c 'while [ ! -e "$0" ]; do sleep 0.02; done' "$d/go"
  if ! wait_for 10 is_held "$key"; then
    fail "$strategy queue: the holder never held"
    continue
  fi
  waiters=()
  for i in $(seq "$n"); do
    start_bg w dblock -d "$proxied" --strategy "$strategy" run -v "$key" -w 60 -- true 2>"$d/err.$i"
    waiters+=("$w")
  done
  check "$strategy queue: all $n waiters wait" \
    wait_for 30 eval '[ "$(grep -l "is held" "$d"/err.* 2>/dev/null | wc -l)" -ge '"$n"' ]'
  sleep 1  # each is in its blocking wait by now
  read -r c0 r0 q0 e0 _ <<<"$(snapshot)"
  t0=$(date +%s%N)
  touch "$d/go"
  wait_exit rc "$holder" 20
  ok=0
  for w in "${waiters[@]}"; do
    wait_exit rc "$w" 60
    [ "$rc" = 0 ] && ok=$((ok + 1))
  done
  read -r c1 r1 q1 e1 _ <<<"$(snapshot)"
  slices=$(( ($(date +%s%N) - t0) / 500000000 + 1 ))
  assert_eq "$strategy queue: every waiter ran" "$n" "$ok"
  statements=$((q1 - q0 + e1 - e0))
  each=$((most + per_slice * slices))
  echo "      $strategy: $n waiters, statements from the release until all were done: $statements ($slices wait slices)"
  assert_between "$strategy queue: statements from the release on, $n waiters (at most $each each)" 1 $((each * n)) "$statements"
done

# A row-lock run at a distance (scripts/bench/delay_proxy.py, a 200 ms round trip R): after
# its two handshakes (side by side) its lock statement and its numbering go out together, one
# on each session (lock.row_numbered waits in the server for its proof, the holder tag the lock
# statement takes), then the release: 2 R, as a lease run's take and release. The counts above
# add the two sessions' round trips, so the path is timed here instead: each row-lock run
# against a lease run's on the same proxy (the same handshake), the quickest of two each, within
# half a round trip of it. Numbering after the grant's answer was a round trip more.
delay_ms=100
python3 "$DBLOCK_SOURCE_DIR/scripts/bench/delay_proxy.py" --target-port "$(python3 -c 'import sys, urllib.parse; print(urllib.parse.urlsplit(sys.argv[1]).port or 3306)' "$DBLOCK_DSN")" \
  --delay-ms "$delay_ms" --port-file "$E2E_TMP/delay.port" --lifetime 120 >/dev/null &
remember_pid $!
if wait_for 10 test -s "$E2E_TMP/delay.port"; then
  far=$(plain_dsn_via "$(cat "$E2E_TMP/delay.port")")
  # quickest_ms STRATEGY KEY: the quicker of two runs' wall times, in ms.
  quickest_ms() {
    local best="" t0 t1 ms _
    for _ in 1 2; do
      t0=$(date +%s%N)
      dblock -d "$far" --strategy "$1" run "$2" -- true || { echo 0; return; }
      t1=$(date +%s%N)
      ms=$(((t1 - t0) / 1000000))
      [ -z "$best" ] || [ "$ms" -lt "$best" ] && best=$ms
    done
    echo "$best"
  }
  lease_ms=$(quickest_ms lease rt-far-lease)
  for strategy in for-update txn-insert; do
    ms=$(quickest_ms "$strategy" "rt-far-$strategy")
    echo "      at a ${delay_ms}x2 ms round trip: $strategy run $ms ms, lease run $lease_ms ms"
    assert_between "$strategy: a run at a distance within half a round trip of a lease run's (2 round trips after the handshakes)" \
      1 $((lease_ms + delay_ms)) "$ms"
  done
else
  fail "the delay proxy did not start"
fi

finish

#!/usr/bin/env bash
# What one `dblock run k -- true` costs the PostgreSQL server, per strategy, counted on the wire
# by a proxy of our own (tests/e2e/postgres_wire_count.py) rather than from server-wide
# statistics that parallel tests disturb:
#  - lease and advisory: one connection; for-update and txn-insert: two (the holder session and
#    the autocommit one that numbers the token and records the run);
#  - after the handshake, lease (a statement each): one to acquire (the failover gate folded
#    in), one to release with its history row and trim (autocommit), and the release's Parse
#    ahead (below), 2 or 3; advisory: the lock and the token in one statement, which reads the
#    failover record itself (the gate opens only on the session the handshake gave, so it also
#    proves the session served directly, the fail-closed check of issue 46, and nothing asks
#    apart); to release, one statement: the row, then the unlock, then the history row and its
#    trim (autocommit), made ready while the command runs;
#    for-update and txn-insert: on the holder's connection BEGIN, the lock timeout and the lock
#    in one round trip (a pipeline), sent while the other connection reads the record, and, to
#    release, one statement in the holder's own transaction (the row, then the history row and
#    its trim) with its COMMIT in the same round trip, which ends the lock with the row's
#    release; on the other the record and the token; 4 round trips in all (5 when the
#    release's Parse, made in a savepoint while the command runs, is answered apart), and nothing else:
#    no schema check; the session settings travel in the startup packet;
#  - lease makes its release's statement ready while the command runs too (a named Parse, not
#    waited for, once its take, which took the row on the session's own server process, said
#    the session is served directly), and planned (EXPLAIN EXECUTE, on a session that keeps one
#    plan per statement), and runs it by name;
#  - advisory makes its release's statement ready while the command runs (a named Parse, once
#    the session is known to be served directly from the take's read of the failover record,
#    which opens only where pg_backend_pid() is the handshake's; its answer is not waited for, so when the command ends before it
#    comes the release goes out with it and the two count one round trip), and the release runs
#    it by name, so the waiter it lets in does not wait for its parse; a row-lock waiter's
#    numbering is made ready before it waits, and run by name once its lock is granted;
#  - on tables that do not exist yet the run creates them and succeeds, and the next run is
#    back to the counts above;
#  - a lease waiter LISTENs on the key once, between its first attempt and its second; a
#    contender without -w runs its take and nothing else; a second waiter queues in the server
#    behind the first and LISTENs only once it is at the head of the queue;
#  - acquire, renew, release and status: one connection each and at most the round trips
#    dblock(1) gives (NOTES, Round trips).
source "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || skip_or_fail "no python3 for the counting proxy"
target_port=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.urlsplit(sys.argv[1]).port or 5432)' "$DBLOCK_DSN")
python3 "$DBLOCK_SOURCE_DIR/tests/e2e/postgres_wire_count.py" --target-port "$target_port" \
  --port-file "$E2E_TMP/proxy.port" --log "$E2E_TMP/wire.log" --lifetime 200 &
remember_pid $!
wait_for 10 test -s "$E2E_TMP/proxy.port" || { fail "the counting proxy did not start"; finish; }
proxy_dsn=$(plain_dsn_via "$(cat "$E2E_TMP/proxy.port")")

# counted COMMAND...: runs COMMAND against the proxy and leaves the connections it made in
# $E2E_TMP/run.log, once the proxy has seen every one of them end.
counted() {
  : >"$E2E_TMP/wire.log"
  DBLOCK_DSN=$proxy_dsn "$@"
  local rc=$? lines=-1
  # The proxy logs a connection when both directions closed: wait until the count settles.
  for _ in $(seq 30); do
    sleep 0.1
    local now
    now=$(wc -l <"$E2E_TMP/wire.log")
    [ "$now" = "$lines" ] && [ "$now" -gt 0 ] && break
    lines=$now
  done
  cp "$E2E_TMP/wire.log" "$E2E_TMP/run.log"
  return $rc
}
# wire FIELD: connections | round_trips | summary (both) | statements | queries (one per line) | options
#   | holder_messages, holder_last: a row lock's holder connection's message types, its last query
#   | holder_queries, holder_round_trips: its queries (one per line), its round trips
#   | holder_named, holder_bound: its named statements and the names it ran
wire() {
  python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in rows if not r["cancel"]]
what = sys.argv[2]
if what == "connections": print(len(rows))
elif what == "round_trips": print(sum(r["round_trips"] for r in rows))
elif what == "summary": print(len(rows), sum(r["round_trips"] for r in rows))
elif what == "statements": print(sum(len(r["queries"]) for r in rows))
elif what == "queries": print("\n".join(q for r in rows for q in r["queries"]))
elif what == "named": print("\n".join(q for r in rows for q in r["named"]))
elif what == "bound": print("\n".join(q for r in rows for q in r["bound"]))
elif what == "options": print("\n".join(r["startup"].get("options", "") for r in rows))
else:
    holder = [r for r in rows if any("claims" in q and ("FOR UPDATE" in q or "pg_try_advisory_xact_lock" in q) for q in r["queries"])]
    if what == "holder_messages": print(holder[0]["messages"] if holder else "")
    elif what == "holder_queries": print("\n".join(holder[0]["queries"]) if holder else "")
    elif what == "holder_last": print(holder[0]["queries"][-1] if holder else "")
    elif what == "holder_round_trips": print(holder[0]["round_trips"] if holder else 0)
    elif what == "holder_named": print("\n".join(holder[0]["named"]) if holder else "")
    elif what == "holder_bound": print("\n".join(holder[0]["bound"]) if holder else "")' "$E2E_TMP/run.log" "$1"
}

dblock init >/dev/null || fail "init"
for s in lease advisory for-update txn-insert; do
  k=$(key "wire-$s")
  dblock -s "$s" run "$k" -- true || fail "$s: warm-up run"  # for-update: the key's claims row
  counted dblock -s "$s" run "$k" -- true
  assert_eq "$s: run exits 0" 0 "$?"
  case $s in
    lease) conns=1 least=2 trips=3 ;;  # the release's Parse ahead: not waited for
    advisory) conns=1 least=2 trips=3 ;;
    # The same, in two groups (the savepoint's, then its rollback's), sent at once but answered
    # apart: on a loaded machine the second may count as a turn of its own (the whole suite
    # once counted 6 for a for-update run). The release's name and its savepoint are checked below.
    *) conns=2 least=4 trips=6 ;;
  esac
  assert_eq "$s: connections per run" "$conns" "$(wire connections)"
  assert_between "$s: round trips after the handshake ($(wire queries | cut -c1-60 | tr '\n' '|'))" "$least" "$trips" \
    "$(wire round_trips)"
  check "$s: no session setup or schema check on the hot path" \
    bash -c "! grep -qiE 'set_config\(s\.name|pg_settings|information_schema' <<<\"\$1\"" _ "$(wire queries)"
  check "$s: the session settings travel in the startup packet" grep -q "idle_session_timeout=" <<<"$(wire options)"
  assert_eq "$s: one history row per run" 2 "$(history_field "$k" runs.#)"
  # advisory: the failover gate, the lock and the token in one statement.
  [ "$s" = advisory ] && check "$s: the lock and the token in one statement" \
    grep -Eq '^WITH g AS \(SELECT .* k AS \(SELECT pg_try_advisory_lock.*INSERT INTO' <<<"$(wire queries)"
  # A lease's release and its history row (and, once in a while, the trim) are one statement;
  # advisory's the same with the unlock between them, made ready (a named Parse) while the
  # command ran and run by that name.
  case $s in
    lease)
      check "$s: the release and its history row in one statement" \
        grep -Eq '^WITH u AS \(UPDATE .* SET released_at.* a AS \(INSERT INTO \S+runs' <<<"$(wire queries)"
      # Named while the command runs (its take said the session is served directly: no round
      # trip to ask), so the waiter it lets in does not wait for its parse.
      name=$(wire named | grep -P '^dblock_\d+\tWITH u AS \(UPDATE .* SET released_at.* a AS \(INSERT INTO \S+runs' | cut -f1)
      check "$s: the release made ready by name while the command runs" test -n "$name"
      check "$s: and the release runs it by that name" grep -qx "${name:-none}" <<<"$(wire bound)"
      # and planned then too (EXPLAIN plans without running), on a session that keeps that one
      # plan for every run: its Bind in the handoff plans nothing.
      check "$s: the release planned while the command runs" grep -qx "EXPLAIN EXECUTE ${name:-none}(NULL.*)" <<<"$(wire queries)"
      check "$s: on a session that keeps one plan per statement" grep -q "plan_cache_mode=force_generic_plan" <<<"$(wire options)"
      continue ;;
    advisory)
      name=$(wire named | grep -P '^dblock_\d+\tWITH u AS \(UPDATE .* SET released_at.*pg_advisory_unlock.* a AS \(INSERT INTO \S+runs' | cut -f1)
      check "$s: the release, the unlock and the history row in one statement, prepared by name" test -n "$name"
      check "$s: and the release runs it by that name" grep -qx "${name:-none}" <<<"$(wire bound)"
      continue ;;
  esac
  # A row lock's release and its history row are one statement in the holder's own transaction
  # (running there is the proof that the lock held to the end), and its COMMIT, the holder's
  # last statement, goes with it, one Sync: the lock ends with the row's release.
  check "$s: the release and the history row in one statement, in the holder's transaction" \
    grep -Eq '^WITH u AS \(UPDATE .* SET released_at.* a AS \(INSERT INTO \S+runs' <<<"$(wire holder_queries)"
  assert_eq "$s: the holder's COMMIT is its last statement" COMMIT "$(wire holder_last)"
  # The release is named (and planned) while the command runs, inside the transaction: in a
  # savepoint rolled back after it, so that a Parse that failed could not end the transaction
  # and the lock; the release then runs by that name (a Bind, no Parse) with its COMMIT.
  check "$s: BEGIN, the lock timeout and the lock sent at once, one Sync; the release made ready in a savepoint; the release by name and its COMMIT, one Sync ($(wire holder_messages))" \
    grep -Eq '^P B D E P B D E P B D E S P B D E P P B D E S P B D E P B D E S B D E P B D E S( X)?$' <<<"$(wire holder_messages)"
  name=$(wire holder_named | grep -P '^dblock_\d+\tWITH u AS \(UPDATE .* SET released_at.* a AS \(INSERT INTO \S+runs' | cut -f1)
  check "$s: the holder names its release while the command runs" test -n "$name"
  check "$s: and releases by that name" grep -qx "${name:-none}" <<<"$(wire holder_bound)"
  check "$s: the name made in a savepoint, rolled back after it" \
    grep -Pzq 'SAVEPOINT dblock_prepare\n.*\n.*\nROLLBACK TO SAVEPOINT dblock_prepare\nRELEASE SAVEPOINT dblock_prepare' <<<"$(wire holder_queries)"
done

# The other subcommands, one connection each: their round trips after the handshake, the
# counts dblock(1) gives (NOTES, Round trips). acquire, renew and release are the lease's own;
# renew and release read the table's columns and the key's slots before their statement.
# sub_bound LABEL TRIPS COMMAND...: runs a dblock subcommand through the proxy: status 0, one
# connection, at most TRIPS round trips (today's count: a cut is welcome, a creep fails).
sub_bound() {
  local label=$1 trips=$2 conns n
  shift 2
  counted dblock "$@" >"$E2E_TMP/sub.out"
  assert_eq "$label: exits 0" 0 "$?"
  read -r conns n <<<"$(wire summary)"
  echo "      $label: connections=$conns round_trips=$n"
  assert_eq "$label: one connection" 1 "$conns"
  assert_between "$label: round trips after the handshake, at most $trips" 1 "$trips" "$n"
  [ "$n" -le "$trips" ] || wire queries | cut -c1-70 | sed 's/^/        /'
}
subcommand_bounds 1 4 3 1

# The holder session ended by the server: the run exits 76 (lost), and the autocommit
# connection still records it, as lost.
command -v psql >/dev/null || skip_or_fail "no psql to end a holder's session with"
k=$(key spare-killed)
start_bg h dblock -s for-update run "$k" --ttl 30s -- sleep 20
wait_for 10 is_held "$k" || fail "for-update holder never held"
sleep 0.5
id=$(server_sql "SELECT session_id FROM ${DBLOCK_TABLE_PREFIX}locks WHERE name = '$k'")
assert_eq "the holder's session was ended" t "$(server_sql "SELECT pg_terminate_backend($id)")"
wait_exit rc "$h" 10
assert_eq "the holder exits 76 (lost)" 76 "$rc"
assert_eq "its run is in the history" 1 "$(history_field "$k" runs.#)"
assert_eq "as lost" lost "$(history_field "$k" runs.0.outcome)"

# Tables that do not exist yet: created by the run's first statement's failure, then hot again.
for s in lease advisory for-update txn-insert; do
  k=$(key "fresh-$s")
  fresh_prefix="${DBLOCK_TABLE_PREFIX}f_${s//-/_}_"
  counted env DBLOCK_TABLE_PREFIX="$fresh_prefix" dblock -s "$s" run "$k" -- true
  assert_eq "$s: the first run on a database without the tables exits 0" 0 "$?"
  check "$s: it created them" grep -q "CREATE TABLE" <<<"$(wire queries)"
  counted env DBLOCK_TABLE_PREFIX="$fresh_prefix" dblock -s "$s" run "$k" -- true
  case $s in
    lease) least=2 trips=3 ;;
    advisory) least=2 trips=3 ;;
    *) least=4 trips=6 ;;  # as above
  esac
  assert_between "$s: the next run is back to at most $trips round trips" "$least" "$trips" "$(wire round_trips)"
  assert_eq "$s: both runs are in the new history" 2 "$(DBLOCK_TABLE_PREFIX=$fresh_prefix history_field "$k" runs.#)"
done

# A row-lock waiter: its numbering is prepared before it waits and runs by that name; so is
# its release in its own transaction (the next waiter's wait ends with it), prepared on the
# holder connection once its first wait (half a second) ended without the lock, before its
# next transaction begins, and run by name inside it.
for s in for-update txn-insert; do
  k=$(key "wire-wait-$s")
  start_bg h dblock -s "$s" run "$k" -- sleep 1.5
  wait_for 10 is_held "$k" || fail "$s holder never held"
  counted dblock -s "$s" run "$k" -w 20s -- sleep 0.3
  assert_eq "$s waiter exits 0" 0 "$?"
  wait "$h"
  name=$(wire named | grep -P '^dblock_\d+\tINSERT INTO \S+locks" AS l ' | cut -f1)
  check "the $s waiter prepares its numbering by name" test -n "$name"
  check "and numbers its row by that name" grep -qx "${name:-none}" <<<"$(wire bound)"
  name=$(wire holder_named | grep -P '^dblock_\d+\tWITH u AS \(UPDATE .* SET released_at.* a AS \(INSERT INTO \S+runs' | cut -f1)
  check "the $s waiter prepares its release on its holder connection by name" test -n "$name"
  check "and releases by that name" grep -qx "${name:-none}" <<<"$(wire holder_bound)"
  assert_eq "$s: the waiter's run is in the history, ok" ok "$(history_field "$k" runs.0.outcome)"
  # Its end is the release's own time, not that of the parse before the wait.
  assert_between "$s: the waiter's run lasted its command's 0.3 s (ms)" 300 20000 "$(history_field "$k" runs.0.duration_ms)"
  assert_eq "$s: both runs are" 2 "$(history_field "$k" runs.#)"
done
# A waiter whose waits in the server end with their slice (half a second) sends the next one
# at once: it asks who holds the key on its first refusal and then only now and then (every 5 s;
# acquire_loop.cpp, LockRequest::describe_holder), as a read between two slices would be a round
# trip in which a release finds nobody waiting. Over a holder's 4 s, about 8 slices: each was
# followed by that read (8 reads; advisory 19 round trips in all, where the bound leaves the
# handshake's failover read, the wait's naming, the numbering and the release).
# runs_of PATTERN: how often statements matching PATTERN (a Perl regex from ^) ran, unnamed or
# by name (a named one's Parse is among the queries too).
runs_of() {
  local names
  names=$(wire named | grep -P "^dblock_\d+\t${1#^}" | cut -f1)
  echo $(($(wire queries | grep -cP "$1") - $(wc -w <<<"$names") + $(wire bound | grep -cxF "${names:-none}")))
}
holder_reads() { runs_of '^SELECT name, owner, host, pid, token, strategy'; }
# A row-lock waiter's slice is one round trip on its holder connection: a slice that ends in
# lock_timeout leaves its transaction aborted, and that transaction's ROLLBACK goes ahead of the
# next slice's BEGIN, lock timeout and lock statement, in their write, where it was a round trip
# of its own, awaited (two a slice: a release landing in between found the waiter a round trip
# late). Beyond its slices (a BEGIN each), the holder connection's round trips are the release
# with its COMMIT, and its Parse should the server answer it apart (the binary before: twice
# its slices).
for s in advisory for-update txn-insert; do
  k=$(key "wire-slices-$s")
  start_bg h dblock -s "$s" run "$k" -- sleep 4
  wait_for 10 is_held "$k" || fail "$s: slices: the holder never held"
  counted dblock -s "$s" run "$k" -w 20s -- true
  assert_eq "$s: slices: the waiter exits 0" 0 "$?"
  wait "$h"
  assert_between "$s: a waiter over a 4 s hold asks who holds the key once" 1 1 "$(holder_reads)"
  [ "$s" = advisory ] &&
    assert_between "$s: a waiter over a 4 s hold: its slices and little else (round trips)" 8 14 "$(wire round_trips)"
  if [ "$s" != advisory ]; then
    slices=$(wire holder_queries | grep -c '^BEGIN')
    echo "      $s: slices=$slices holder_round_trips=$(wire holder_round_trips) round_trips=$(wire round_trips)"
    assert_between "$s: a waiter over a 4 s hold waits in slices of half a second" 4 12 "$slices"
    assert_between "$s: a waiter over a 4 s hold: one round trip a slice ($slices) on its holder connection, and its release" \
      "$slices" $((slices + 2)) "$(wire holder_round_trips)"
  fi
done
# A statement run again is named with its Parse in the pipeline ahead of its run by that name:
# a lease's renewals are one round trip each, the second's naming included (it was two: the
# Parse's answer awaited, then the run). The take, the release's Parse (made ready while the
# command runs, answered long before its end) and the release: 3 more.
k=$(key wire-renew)
counted dblock -s lease run "$k" --ttl 3s -- sleep 3.5
assert_eq "lease --ttl 3s, 3.5 s: exits 0" 0 "$?"
renewals=$(runs_of '^UPDATE \S+locks" SET renewed_at')
assert_between "lease --ttl 3s, 3.5 s: renewals a second apart" 2 4 "$renewals"
assert_eq "lease --ttl 3s, 3.5 s: a round trip per renewal, and 3 (round trips)" $((3 + renewals)) "$(wire round_trips)"
# A row-lock run with -w that finds the key free pays nothing for what a waiter makes ready
# (the release's name is made only once a first wait ended without the lock): one round trip
# over the run without -w (its bound above, 6 with the release's two groups not waited for), the
# numbering's parse before the take.
for s in for-update txn-insert; do
  k=$(key "wire-free-$s")
  dblock -s "$s" run "$k" -- true || fail "$s: warm-up run"
  counted dblock -s "$s" run "$k" -w 5s -- true
  assert_eq "$s -w, key free: exits 0" 0 "$?"
  assert_between "$s -w, key free: round trips after the handshake" 4 7 "$(wire round_trips)"
done
# A release named before the wait whose Parse failed (the history table dropped meanwhile): it
# fails inside the transaction, whose lock holds until the ROLLBACK, and the run releases apart
# (the row first, then the ROLLBACK, the table made again): both exit 0, both runs recorded.
fresh_prefix="${DBLOCK_TABLE_PREFIX}nm_"
k=$(key named-missing)
DBLOCK_TABLE_PREFIX=$fresh_prefix dblock -s for-update run "$k" -- true || fail "named-missing: first run"
start_bg h env DBLOCK_TABLE_PREFIX="$fresh_prefix" dblock -s for-update run "$k" -- sleep 1.5
DBLOCK_TABLE_PREFIX=$fresh_prefix wait_for 10 is_held "$k" || fail "named-missing: holder never held"
server_sql "DROP TABLE ${fresh_prefix}runs" >/dev/null
counted env DBLOCK_TABLE_PREFIX="$fresh_prefix" dblock -s for-update run "$k" -w 20s -- true
assert_eq "named-missing: the waiter exits 0" 0 "$?"
wait_exit rc "$h" 10
assert_eq "named-missing: the holder exits 0" 0 "$rc"
check "named-missing: its release was sent by name" test -n "$(wire holder_bound)"
assert_eq "named-missing: both runs recorded" 2 "$(DBLOCK_TABLE_PREFIX=$fresh_prefix history_field "$k" runs.#)"
assert_eq "named-missing: the waiter's ok" ok "$(DBLOCK_TABLE_PREFIX=$fresh_prefix history_field "$k" runs.0.outcome)"
assert_eq "named-missing: the key is free" free "$(DBLOCK_TABLE_PREFIX=$fresh_prefix status_field "$k" state)"

# A holder whose release's Parse, sent inside its transaction while the command runs, fails
# (the history table dropped before it started): the savepoint around it keeps the transaction
# and the lock (its renewals, a second apart with --ttl 3s, prove it held), and the release, by a
# name that does not exist, fails in the transaction and is made apart: exit 0, the key free.
fresh_prefix="${DBLOCK_TABLE_PREFIX}pf_"
k=$(key parse-fails)
DBLOCK_TABLE_PREFIX=$fresh_prefix dblock -s txn-insert run "$k" -- true || fail "parse-fails: first run"
server_sql "DROP TABLE ${fresh_prefix}runs" >/dev/null
counted env DBLOCK_TABLE_PREFIX="$fresh_prefix" dblock -s txn-insert run --ttl 3s "$k" -- sleep 2.5
assert_eq "parse-fails: the holder keeps its lock to the end and exits 0" 0 "$?"
check "parse-fails: its release's Parse went in a savepoint, rolled back" \
  grep -qx "ROLLBACK TO SAVEPOINT dblock_prepare" <<<"$(wire holder_queries)"
assert_eq "parse-fails: the key is free" free "$(DBLOCK_TABLE_PREFIX=$fresh_prefix status_field "$k" state)"

# A lease waiter: one LISTEN, after its first attempt found the key busy; woken by the release.
k=$(key wire-wait)
start_bg h dblock run "$k" -- sleep 1.5
wait_for 10 is_held "$k" || fail "lease holder never held"
counted dblock run "$k" -w 20s -- true
assert_eq "lease waiter exits 0" 0 "$?"
wait "$h"
assert_eq "the lease waiter LISTENs once" 1 "$(wire queries | grep -c 'LISTEN "dblock_release_')"
check "after its first attempt" grep -Eq '^WITH f AS .*INSERT INTO' <<<"$(wire queries | sed -n 1p)"
# Its next take, which the release lets run behind the wait for the holder's handoff lock, is
# named ahead of that wait, so the handoff does not wait for its parse.
name=$(wire named | grep -P '^dblock_\d+\tWITH f AS .*INSERT INTO' | cut -f1)
check "the lease waiter names its take once the first was refused" test -n "$name"
check "and takes by that name" grep -qx "${name:-none}" <<<"$(wire bound)"

# A contender without -w that finds the key held: its take, refused, and nothing more (no
# LISTEN, no queue, no second take): what each host of a start storm costs the server.
k=$(key wire-nowait)
start_bg h dblock run "$k" -- sleep 1.5
wait_for 10 is_held "$k" || fail "no-wait: holder never held"
counted dblock run "$k" -- true
assert_eq "no-wait contender exits 75" 75 "$?"
wait "$h"
assert_eq "no-wait contender: one statement, the take ($(wire queries | cut -c1-40 | tr '\n' '|'))" 1 "$(wire statements)"
# The session strategies' contenders: advisory's take, which reads the failover record itself
# and answers with the holder's row when refused (it read the record and the row in round trips
# of their own: 3); a row lock's lock refused on its holder connection, and the record and the
# holder read on the other; the refused transaction's ROLLBACK is not waited for (it held
# nothing, and the contender's exit closes the connection: it was 4).
for s in advisory for-update txn-insert; do
  k=$(key "wire-nowait-$s")
  start_bg h dblock -s "$s" run --ttl 120s "$k" -- sleep 1.5
  wait_for 10 is_held "$k" || fail "no-wait $s: holder never held"
  counted dblock -s "$s" run "$k" -- true
  assert_eq "no-wait $s contender exits 75" 75 "$?"
  wait "$h"
  case $s in
    advisory) trips=1 ;;
    *) trips=3 ;;
  esac
  assert_between "no-wait $s contender: round trips after the handshake ($(wire queries | cut -c1-40 | tr '\n' '|'))" 1 "$trips" \
    "$(wire round_trips)"
done

# Lease waiters queue: a second waiter waits in the server for the place of the one at the head
# of the key's queue (a session advisory lock), and does not LISTEN meanwhile, so a release
# wakes only the head.
k=$(key wire-queue)
go="$E2E_TMP/go-queue"
start_bg h dblock run "$k" -- sh -c "while [ ! -e '$go' ]; do sleep 0.05; done"
wait_for 10 is_held "$k" || fail "queue: holder never held"
start_bg w1 dblock run "$k" -w 30s -- sleep 0.5
sleep 1  # the first waiter refused, at the head, LISTENing
(sleep 2 && touch "$go") &
remember_pid $!
counted dblock run "$k" -w 30s -- true
assert_eq "queue: the second waiter exits 0" 0 "$?"
wait_exit rc "$w1" 10
assert_eq "queue: the first waiter exits 0" 0 "$rc"
wait "$h"
# (Lease promises no order: the second may still take the key between two of its waits, in the
# moment between the holder's release and the head's take, so the order is not asserted.)
queue_waits=$(wire queries | grep -c 'pg_advisory_lock')
check "queue: the second waiter waited for the head's place more than once (a slice each): $queue_waits" \
  test "$queue_waits" -ge 2
assert_eq "queue: and it LISTENed only after its first wait for that place" "" \
  "$(wire queries | sed '/pg_advisory_lock/q' | grep '^LISTEN ')"
assert_eq "queue: three runs" 3 "$(history_field "$k" runs.#)"
finish

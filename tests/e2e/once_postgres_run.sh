#!/usr/bin/env bash
# `run` against PostgreSQL:
#  - pg_terminate_backend of a session holder: the command is terminated within one heartbeat,
#    run exits 76, the key is free and the next token is larger;
#  - a waiter started with -w starts within a fraction of a second of the holder's release
#    (lease: LISTEN/NOTIFY; session strategies: the server wakes it); median of 5 per strategy;
#  - txn-insert waiters queue: with a holder and 4 waiters, none waits for the holder's
#    transaction itself (a commit would wake every one of them), and all 4 then run in turn;
#  - lease: a take that finds the key's free row locked by another transaction is refused at
#    once and leaves no lock of its own on the row;
# (kill -9 of a holder with a waiter: tests/e2e/test_run_kill_waiter.sh; the server's idle
# killers: tests/e2e/test_idle_timeouts.sh; both in every cell they apply to.)
source "$(dirname "$0")/lib.sh"

command -v psql >/dev/null || skip_or_fail "no psql to kill a holder with"
sql() { server_sql "$1"; }
sessions="advisory for-update txn-insert"

# 2. Handoff: the holder's command writes the time it ends; the waiter (started with -w while
# the lock is held, so its backoff has grown to ~1 s) writes the time it starts. Median of 5.
# The strategies side by side on keys of their own (one after the other they took 50 s), started
# 0.7 s apart so their handoffs seldom fall on the same instant; the other parts run meanwhile.
# (a script file, not sh -c: the command's own -c must not meet dblock's option parser)
printf '#!/bin/sh\ndate +%%s%%N >"$1"\n' >"$E2E_TMP/stamp.sh"
chmod +x "$E2E_TMP/stamp.sh"
handoffs() {
  local s=$1 k i h rc median gaps=()
  k=$(key "wake-$s")
  for i in 1 2 3 4 5; do
    rm -f "$PART_TMP/released" "$PART_TMP/started"
    start_bg h dblock -s "$s" run "$k" -- sh -c 'sleep 2.5; date +%s%N >"$0"' "$PART_TMP/released"
    wait_for 10 is_held "$k" || { fail "$s: handoff holder never held"; break; }
    rc=0
    timeout 60 dblock -s "$s" run "$k" --wait=20s -- "$E2E_TMP/stamp.sh" "$PART_TMP/started" || rc=$?
    wait $h
    if [ "$rc" = 0 ] && [ -s "$PART_TMP/started" ] && [ -s "$PART_TMP/released" ]; then
      gaps+=($(( ($(cat "$PART_TMP/started") - $(cat "$PART_TMP/released")) / 1000000 )))
    else
      fail "$s: handoff sample $i: the waiter exited $rc or did not run"
    fi
  done
  [ "${#gaps[@]}" -eq 5 ] || return 0
  median=$(printf '%s\n' "${gaps[@]}" | sort -n | sed -n 3p)
  echo "      $s: handoff from the end of the holder's command to the waiter's start: median ${median} ms (${gaps[*]})"
  # LISTEN/NOTIFY (or the server's own lock queue) wakes the waiter at once; polling alone
  # would take up to its ~1 s backoff. Generous for a loaded machine.
  assert_between "$s: median handoff ${median} ms" -50 300 "$median"
}
for s in lease $sessions; do
  in_parallel "handoff-$s" handoffs "$s"
  sleep 0.7
done

# 1. pg_terminate_backend of the holder's session. Heartbeat every TTL/3 = 3 s, 1 s grace.
for s in $sessions; do
  k=$(key "killed-$s")
  dblock -s "$s" run "$k" --ttl 9s --kill-after 1s -- \
    sh -c 'echo $$ >"$0.pid"; echo "$DBLOCK_TOKEN" >"$0.token"; sleep 30; echo survived >"$0.survived"' "$E2E_TMP/$s" \
    2>"$E2E_TMP/$s.err" &
  holder=$!
  remember_pid $holder
  if ! { wait_for 10 test -s "$E2E_TMP/$s.token" && wait_for 10 is_held "$k"; }; then
    fail "$s: the holder never showed as held"
    continue
  fi
  killed=$(sql "SELECT count(pg_terminate_backend(session_id::int)) FROM \"${DBLOCK_TABLE_PREFIX}locks\" WHERE name = '$k'")
  assert_eq "$s: holder session terminated" 1 "$killed"
  start=$(now_ms)
  wait_exit rc $holder 20
  took=$(($(now_ms) - start))
  assert_eq "$s: run exits 76 after its session was killed ($(head -c 200 "$E2E_TMP/$s.err"))" 76 "$rc"
  assert_between "$s: noticed within $took ms (heartbeat 3 s, ttl 9 s)" 0 7000 "$took"
  check "$s: the command was terminated" wait_for 5 bash -c "! kill -0 $(cat "$E2E_TMP/$s.pid") 2>/dev/null"
  check "$s: the command did not run on" test ! -e "$E2E_TMP/$s.survived"
  check "$s: the key is free afterwards" wait_for 5 is_free "$k"
  token1=$(cat "$E2E_TMP/$s.token")
  token2=$(timeout 30 dblock -s "$s" run "$k" -- sh -c 'echo "$DBLOCK_TOKEN"')
  check "$s: next token '$token2' > $token1" test "${token2:-0}" -gt "$token1"
done

# 3. txn-insert: waiters blocked on the unique index all wait for the holder's transaction,
# so its commit wakes every one and all but one block again (each handoff costs the server
# work for every waiter). They queue on the key's transaction-level advisory lock instead.
k=$(key "queue")
start_bg h dblock -s txn-insert run "$k" -- sh -c 'while [ ! -e "$0" ]; do sleep 0.05; done' "$E2E_TMP/queue.go"
if wait_for 10 is_held "$k"; then
  holder_pid=$(sql "SELECT session_id FROM \"${DBLOCK_TABLE_PREFIX}locks\" WHERE name = '$k'")
  waiters=()
  for i in 1 2 3 4; do
    start_bg w dblock -s txn-insert run "$k" -w 30 -- sh -c 'echo "$DBLOCK_TOKEN" >"$0"' "$E2E_TMP/queue.$i"
    waiters+=("$w")
  done
  blocked() { sql "SELECT count(DISTINCT pid) FROM pg_locks WHERE NOT granted AND $holder_pid = ANY(pg_blocking_pids(pid))$1"; }
  check "all 4 waiters are blocked by the holder's session" wait_for 15 eval '[ "$(blocked "")" = 4 ]'
  assert_eq "waiters waiting for the holder's transaction itself" 0 "$(blocked " AND locktype = 'transactionid'")"
  touch "$E2E_TMP/queue.go"
  wait_exit rc "$h" 20
  assert_eq "queue holder exit" 0 "$rc"
  for i in 1 2 3 4; do
    wait_exit rc "${waiters[$((i - 1))]}" 30
    assert_eq "queued waiter $i exit" 0 "$rc"
  done
  tokens=$(cat "$E2E_TMP"/queue.[1-4] 2>/dev/null | sort -un | wc -l)
  assert_eq "4 queued waiters ran with 4 different tokens" 4 "$tokens"
else
  fail "txn-insert queue: the holder never held"
fi

# 4. lease: a take that finds the key's free row locked by another transaction (the first of
# the waiters a release woke, taking it) is refused at once and leaves the row unlocked: the
# others neither wait for that commit nor take the row's lock one after another behind it.
k=$(key "skip")
dblock run "$k" -- true || fail "lease skip: the first run"
start_bg t sql "UPDATE \"${DBLOCK_TABLE_PREFIX}locks\" SET pid = pid WHERE name = '$k'; SELECT pg_sleep(4)"
locked() { [ "$(sql "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'transactionid' AND a.query LIKE '%pg_sleep(4)%'")" -ge 1 ]; }
if wait_for 10 locked; then
  t0=$(now_ms)
  rc=0
  dblock run "$k" -- true 2>/dev/null || rc=$?
  took=$(($(now_ms) - t0))
  assert_eq "lease skip: the take is refused (busy)" 75 "$rc"
  check "lease skip: at once, not after the other transaction ($took ms)" test "$took" -lt 2000
  wait_exit rc "$t" 10
  assert_eq "lease skip: the row is left unlocked (xmax)" 0 "$(sql "SELECT xmax FROM \"${DBLOCK_TABLE_PREFIX}locks\" WHERE name = '$k'")"
  dblock run "$k" -- true
  assert_eq "lease skip: once that transaction ended the key is taken" 0 "$?"
else
  fail "lease skip: the row was never locked"
fi
join_parallel

finish

#!/usr/bin/env bash
# `run` on MySQL/MariaDB when the server takes the lock away, for every strategy:
#  - release --force (KILL CONNECTION of a session holder; a lease taken over) -> the run exits 76;
#  - a real `KILL CONNECTION <id>` sent with the mariadb client to the holder's session ends
#    the command within one heartbeat and the run exits 76 (session strategies);
# (kill -9 of a holder with a waiter: tests/e2e/test_run_kill_waiter.sh; the server's idle
# killer: tests/e2e/test_idle_timeouts.sh; both in every cell they apply to.)
# The next holder's fencing token is always greater.
source "$(dirname "$0")/lib.sh"

command -v mariadb >/dev/null || skip_or_fail "no mariadb client to send KILL CONNECTION with"

sql() { server_sql "$1"; }

token_of() { sql "SELECT token FROM \`${DBLOCK_TABLE_PREFIX}locks\` WHERE name = '$1'"; }

# start_holder STRATEGY KEY: a run whose command writes its pid to $E2E_TMP/cmd.KEY, its token
# to $E2E_TMP/token.KEY and sleeps; sets $holder. False if the lock never shows as held.
start_holder() {
  local s=$1 k=$2
  rm -f "$E2E_TMP/token.$k" "$E2E_TMP/cmd.$k"
  start_bg holder dblock -s "$s" run "$k" --ttl 9s --kill-after 1s -- \
    sh -c 'echo $$ >"$1"; echo "$DBLOCK_TOKEN" >"$0"; sleep 60' "$E2E_TMP/token.$k" "$E2E_TMP/cmd.$k" \
    2>"$E2E_TMP/err.$k"
  wait_for 10 test -s "$E2E_TMP/token.$k" && wait_for 10 is_held "$k"
}

# expect_lost NAME KEY MAX_MS: the holder exits 76 within MAX_MS and its command is gone.
expect_lost() {
  local name=$1 k=$2 max=$3 start rc took
  start=$(now_ms)
  wait_exit rc $holder 20
  took=$(($(now_ms) - start))
  assert_eq "$name: run exits 76 ($(head -c 200 "$E2E_TMP/err.$k"))" 76 "$rc"
  assert_between "$name: noticed in $took ms" 0 "$max" "$took"
  check "$name: the command was terminated" wait_for 5 bash -c "! kill -0 $(cat "$E2E_TMP/cmd.$k") 2>/dev/null"
}

# next_token_greater NAME STRATEGY KEY
next_token_greater() {
  local first next
  first=$(cat "$E2E_TMP/token.$3")
  next=$(dblock -s "$2" run "$3" -w 10 -- sh -c 'echo "$DBLOCK_TOKEN"')
  check "$1: next token '$next' > $first" test "${next:-0}" -gt "$first"
}

# 1. release --force takes the lock away.
for s in lease advisory for-update txn-insert; do
  k=$(key "force-$s")
  start_holder "$s" "$k" || { fail "$s: the run never held $k"; continue; }
  check "$s: release --force" dblock release "$k" --force
  # A lease is only lost once someone else takes it; session locks go with the session.
  if [ "$s" = lease ]; then
    check "lease: a thief acquires" bash -c "dblock acquire '$k' --ttl 60s --owner thief >/dev/null"
  fi
  expect_lost "$s, release --force" "$k" 12000
  [ "$s" = lease ] && check "lease: the thief releases" dblock release "$k" --owner thief
  next_token_greater "$s, after release --force" "$s" "$k"
done

# 2. KILL CONNECTION of the holder's session, sent by hand. Heartbeat every TTL/3 = 3 s, then
# SIGTERM and 1 s grace: 4 s, plus slack for a loaded machine; still well before the 9 s TTL.
for s in advisory for-update txn-insert; do
  k=$(key "kill-$s")
  start_holder "$s" "$k" || { fail "$s: the run never held $k"; continue; }
  sid=$(sql "SELECT session_id FROM \`${DBLOCK_TABLE_PREFIX}locks\` WHERE name = '$k'")
  sid=${sid%%:*}  # for-update, txn-insert: "<connection id>:<holder tag>"
  alive=$(sql "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = '${sid:-0}'")
  assert_eq "$s: the holder's session $sid is in the processlist" 1 "$alive"
  # Its transaction takes no gap locks, which would make the INSERT of a neighbouring key (a
  # txn-insert take, a for-update key's first claims row) read busy.
  if [ "$s" != advisory ]; then
    assert_eq "$s: the holder's transaction runs under READ COMMITTED" "READ COMMITTED" \
      "$(sql "SELECT trx_isolation_level FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = '${sid:-0}'")"
  fi
  check "$s: KILL CONNECTION $sid" sql "KILL CONNECTION ${sid:-0}"
  expect_lost "$s, KILL CONNECTION" "$k" 7000
  check "$s: the key is free afterwards" wait_for 5 is_free "$k"
  next_token_greater "$s, after KILL CONNECTION" "$s" "$k"
done

finish

#!/usr/bin/env bash
# `run` on MySQL/MariaDB when the server takes the lock away, for every strategy:
#  - release --force (KILL CONNECTION of a session holder; a lease taken over) -> the run exits 76;
#  - a real `KILL CONNECTION <id>` sent with the mariadb client to the holder's session ends
#    the command within one heartbeat and the run exits 76 (session strategies);
#  - SET GLOBAL wait_timeout=2 (restored afterwards) does not drop a held session lock over a
#    10 s command: status says held and a competing run exits 75 throughout;
# (kill -9 of a holder with a waiter: tests/e2e/test_run_kill_waiter.sh, every backend x strategy.)
# The next holder's fencing token is always greater.
source "$(dirname "$0")/lib.sh"

command -v mariadb >/dev/null || skip_or_fail "no mariadb client to send KILL CONNECTION with"

# mysql://user[:pass]@host[:port]/db[?params] -> mariadb client arguments; the password goes
# through the environment, not the command line.
rest=${DBLOCK_DSN#*://}
userinfo=${rest%%@*}
hostpart=${rest#*@}
hostport=${hostpart%%/*}
database=${hostpart#*/}
database=${database%%\?*}
my_host=${hostport%%:*}
my_port=3306
[[ $hostport == *:* ]] && my_port=${hostport#*:}
my_user=${userinfo%%:*}
my_pw=
[[ $userinfo == *:* ]] && my_pw=${userinfo#*:}
sql() {
  MYSQL_PWD="$my_pw" timeout 10 mariadb --protocol=tcp -h "$my_host" -P "$my_port" -u "$my_user" -D "$database" \
    -N -B -e "$1"
}

# The server-wide idle killer is changed below; put it back however the script ends.
old_wait_timeout=$(sql "SELECT @@GLOBAL.wait_timeout") || { fail "cannot query the server with mariadb"; finish; }
restore_wait_timeout() { sql "SET GLOBAL wait_timeout = $old_wait_timeout" || echo "WARNING: could not restore wait_timeout=$old_wait_timeout"; }
trap 'restore_wait_timeout; e2e_cleanup' EXIT

token_of() { sql "SELECT token FROM \`${DBLOCK_TABLE_PREFIX}locks\` WHERE name = '$1'"; }

# start_holder STRATEGY KEY: a run whose command writes its pid to $E2E_TMP/cmd.KEY, its token
# to $E2E_TMP/token.KEY and sleeps; sets $holder. False if the lock never shows as held.
start_holder() {
  local s=$1 k=$2
  rm -f "$E2E_TMP/token.$k" "$E2E_TMP/cmd.$k"
  dblock -s "$s" run "$k" --ttl 9s --kill-after 1s -- \
    sh -c 'echo $$ >"$1"; echo "$DBLOCK_TOKEN" >"$0"; sleep 60' "$E2E_TMP/token.$k" "$E2E_TMP/cmd.$k" \
    2>"$E2E_TMP/err.$k" &
  holder=$!
  remember_pid $holder
  wait_for 10 test -s "$E2E_TMP/token.$k" && wait_for 10 is_held "$k"
}

# expect_lost NAME KEY MAX_MS: the holder exits 76 within MAX_MS and its command is gone.
expect_lost() {
  local name=$1 k=$2 max=$3 start rc=none took
  start=$(now_ms)
  if wait_for 20 bash -c "! kill -0 $holder 2>/dev/null"; then
    wait $holder
    rc=$?
  else
    kill -KILL $holder 2>/dev/null
  fi
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
  alive=$(sql "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = '${sid:-0}'")
  assert_eq "$s: the holder's session $sid is in the processlist" 1 "$alive"
  check "$s: KILL CONNECTION $sid" sql "KILL CONNECTION ${sid:-0}"
  expect_lost "$s, KILL CONNECTION" "$k" 7000
  check "$s: the key is free afterwards" wait_for 5 is_free "$k"
  next_token_greater "$s, after KILL CONNECTION" "$s" "$k"
done

# 3. wait_timeout=2 on the server: a 10 s command keeps its session lock throughout. The three
# strategies run side by side; every ~0.5 s each key must show held and refuse a competitor.
check "SET GLOBAL wait_timeout = 2" sql "SET GLOBAL wait_timeout = 2"
declare -A idle_holder
for s in advisory for-update txn-insert; do
  k=$(key "idle-$s")
  dblock -s "$s" run "$k" -- sh -c 'touch "$0"; sleep 10' "$E2E_TMP/idle-started.$s" 2>"$E2E_TMP/idle-err.$s" &
  idle_holder[$s]=$!
  remember_pid $!
done
for s in advisory for-update txn-insert; do
  check "$s: idle holder started" wait_for 10 test -e "$E2E_TMP/idle-started.$s"
done
declare -A samples bad
for s in advisory for-update txn-insert; do samples[$s]=0; bad[$s]=""; done
deadline=$((SECONDS + 20))
while [ "$SECONDS" -lt "$deadline" ]; do
  running=0
  for s in advisory for-update txn-insert; do
    kill -0 "${idle_holder[$s]}" 2>/dev/null || continue
    running=1
    k=$(key "idle-$s")
    st=0; dblock status -q "$k" >/dev/null 2>&1 || st=$?
    rc=0; dblock -s "$s" run "$k" -- true 2>/dev/null || rc=$?
    # The holder may have just finished: only count samples taken while it still runs.
    kill -0 "${idle_holder[$s]}" 2>/dev/null || continue
    samples[$s]=$((samples[$s] + 1))
    [ "$st" = 0 ] && [ "$rc" = 75 ] || bad[$s]+=" status=$st,run=$rc@$SECONDS"
  done
  [ "$running" = 1 ] || break
  sleep 0.5
done
for s in advisory for-update txn-insert; do
  rc=none
  if kill -0 "${idle_holder[$s]}" 2>/dev/null; then kill -KILL "${idle_holder[$s]}"; else wait "${idle_holder[$s]}"; rc=$?; fi
  assert_eq "$s: the 10 s command under wait_timeout=2 exits 0 ($(head -c 200 "$E2E_TMP/idle-err.$s"))" 0 "$rc"
  assert_between "$s: sampled the lock ${samples[$s]} times" 8 1000 "${samples[$s]}"
  assert_eq "$s: held and refusing competitors throughout" "" "${bad[$s]}"
done
restore_wait_timeout

finish

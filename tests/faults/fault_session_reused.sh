#!/usr/bin/env bash
# MariaDB hands connection ids out again after a restart. A for-update/txn-insert holder dies
# with the server; once restarted, an unrelated client gets the dead holder's id. status must
# show the key free (not held by that client), and `release --force` must clear the stale
# claim without ending that client (man/dblock.1, release --force).
source "$(dirname "$0")/lib.sh"
server_control_required

s=$DBLOCK_STRATEGY
k=$(key reused)
# A fresh server first: the holder gets a low id, which the next restart soon hands out again.
server_ctl restart 0.2 >/dev/null
server_back() { server_sql "SELECT 1" >/dev/null 2>&1; }
check "$s: the server is up" wait_for 30 server_back
# Ten ids gone first: after the next restart the test's own connections (the checks that the
# server is back) take the lowest ids, which the holder's must be above. A session strategy's
# run opens its two connections side by side, so which of them gets the lower id varies.
mysql_client_options
MYSQL_PWD=$MYSQL_CLIENT_PWD mariadb "${MYSQL_CLIENT_OPTIONS[@]}" \
  -e "$(for ((i = 0; i < 10; i++)); do printf '\\r\n'; done; echo 'SELECT 1;')" >/dev/null 2>&1

dblock run "$k" -- sleep 120 2>>"$E2E_TMP/holder.err" &
holder=$!
remember_pid $holder
check "$s: the holder holds $k" wait_for 10 is_held "$k"
sid=$(server_sql "SELECT session_id FROM ${DBLOCK_TABLE_PREFIX}locks WHERE name = '$k'")
id=${sid%%:*}
# Killed with the server, so nothing marks the row released.
children=$(pgrep -P "$holder" | tr '\n' ' ')
kill -KILL "$holder" $children 2>/dev/null
server_ctl restart 0.5 >/dev/null
check "$s: the server is back" wait_for 30 server_back

# A client reconnects (`\r`) until the server gives it the dead holder's id $id, and stays.
got=$(server_sql "SELECT CONNECTION_ID()")
hops=$((id - got - 1))
if [ "$hops" -lt 0 ]; then
  fail "$s: the server already handed out id $id again (at $got) before the test could take it"
  finish
fi
script=$(for ((i = 0; i < hops; i++)); do printf '\\r\n'; done; echo "SELECT CONNECTION_ID(), SLEEP(60);")
# As server_sql, without its 10 s limit: the client must outlive the checks.
mysql_client_options
MYSQL_PWD=$MYSQL_CLIENT_PWD mariadb "${MYSQL_CLIENT_OPTIONS[@]}" -e "$script" \
  >"$E2E_TMP/victim.out" 2>"$E2E_TMP/victim.err" &
victim=$!
remember_pid $victim
# No other connection until it has got there (each would take an id); reconnecting is quick.
sleep "$((2 + hops / 100))"
assert_eq "$s: an unrelated client now has the dead holder's connection id $id" 1 \
  "$(server_sql "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = $id AND INFO LIKE '%SLEEP(60)%'")"

check "$s: status does not show the dead holder as holding $k" is_free "$k"
assert_status "$s: release --force $k" 0 dblock release "$k" --force
sleep 0.5
check "$s: the unrelated client was not ended" kill -0 "$victim"
assert_eq "$s: the stale claim is cleared" 1 \
  "$(server_sql "SELECT released_at IS NOT NULL FROM ${DBLOCK_TABLE_PREFIX}locks WHERE name = '$k'")"
assert_status "$s: $k can be taken" 0 dblock run "$k" -w 5 -- true
finish

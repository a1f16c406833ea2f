#!/usr/bin/env bash
# -w rides out connection exhaustion: four waiters start while their account may open no
# connection at all (MariaDB: its per-account max_user_connections slot is taken, errno 1226;
# PostgreSQL: CONNECTION LIMIT 0 on its role, SQLSTATE 53300). The limit is lifted 4 s later;
# every waiter then runs its command exactly once, never two at a time.
# The test's own account, not dblock's usual superuser: superusers are exempt from both limits.
source "$(dirname "$0")/lib.sh"
server_control_required

log=$E2E_TMP/log
: >"$log"
k=$(key maxconn)
waiters=4
account=dblock_fault_$$
password=fault-pw-$$
state_dir=$(cat "$SERVERS_STATE")

if [ "$DBLOCK_TEST_BACKEND" = mysql ]; then
  limited_account "$account" "$password" 1 || { fail "create the account"; finish; }
  # The account's only connection slot, held by a session that sleeps until it is killed.
  mariadb -h127.0.0.1 -P"$(dsn_port "$DBLOCK_DSN")" -u"$account" -p"$password" dblock_test -e "SELECT SLEEP(120)" >/dev/null 2>&1 &
  occupant=$!
  remember_pid "$occupant"
  check "the account's only slot is taken" wait_for 10 bash -c \
    "mariadb --socket='$state_dir/mysql/mysqld.sock' -uroot -N -e \"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = '$account'\" | grep -qx 1"
  lift() {
    admin "ALTER USER '$account'@'127.0.0.1' WITH MAX_USER_CONNECTIONS 0;
           FLUSH USER_RESOURCES;"
    kill "$occupant" 2>/dev/null
  }
else
  limited_account "$account" "$password" 0 || { fail "create the role"; finish; }
  lift() { admin "ALTER ROLE $account CONNECTION LIMIT -1"; }
fi
trap 'e2e_cleanup; restore' EXIT

refused=0
dblock status "$k" >"$E2E_TMP/probe.out" 2>&1 || refused=$?
assert_eq "while the limit holds, a connection is refused (exit 69, not 78)" 69 "$refused"
sed 's/^/    /' "$E2E_TMP/probe.out"

# A configuration error is not retried, however long the wait.
wrong=${DBLOCK_DSN/:$password@/:wrong-$password@}
started=$(now_ms)
assert_status "a wrong password within -w 30 exits 78" 78 dblock -d "$wrong" run -w 30 "$k" -- true
assert_between "...at once (ms)" 0 5000 $(($(now_ms) - started))

mark limited
start_waiters "$waiters" "$k" "$log"
sleep 4
lift
mark lifted
expect_waiters_ran "once the limit is lifted"
oracle_check "every waiter ran once, one at a time" "$log" "$waiters"
echo "first run started $(first_start_after "$log" lifted) after the limit was lifted"
finish

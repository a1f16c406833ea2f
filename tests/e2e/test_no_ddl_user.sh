#!/usr/bin/env bash
# cells: (mysql|postgres):lease
# A DBA makes the tables from `dblock schema` (applied twice: idempotent, the failover record
# made once) and the application's user may only read and write rows (dblock(1) PRIVILEGES):
# SELECT, INSERT, UPDATE, DELETE on the tables, no CREATE, ALTER or DROP (PostgreSQL: a schema
# of the test's own where it has only USAGE). Every subcommand and strategy works for it, both
# table formats, `release --force` of its own holders included; doctor passes, and names the
# one privilege revoked. On an older dblock's table (slots missing) inspection still works, and a
# semaphore run is refused (78) naming the ALTER a DBA runs, never trying CREATE; the DDL
# applied again (PostgreSQL) adds the column. Each strategy is exercised here, in one cell
# per server.
source "$(dirname "$0")/lib.sh"

backend=$DBLOCK_TEST_BACKEND
P=$DBLOCK_TABLE_PREFIX
shed="${P}shed"
app="dbl_app_$$_${RANDOM}"
pw="app-pw-$RANDOM"
schema="${P}own"

# admin SQL: as the test DSN's user (the server's superuser), in the tables' schema.
admin() {
  case $backend in
    mysql) server_sql "$1" ;;
    postgres) PGOPTIONS="-c search_path=$schema" server_sql "$1" ;;
  esac
}
# The DSN of the application's user.
rest=${DBLOCK_DSN#*@}
if [ "$backend" = mysql ]; then
  app_dsn="mysql://$app:$pw@$rest"
else
  sep='?'
  [[ $rest == *\?* ]] && sep='&'
  app_dsn="postgres://$app:$pw@$rest${sep}options=-csearch_path%3D$schema"
fi
maker="${app}_maker"
drop_account() {
  if [ "$backend" = mysql ]; then
    server_sql "DROP USER IF EXISTS '$app'@'127.0.0.1'; DROP ROLE IF EXISTS $maker; DROP TABLE IF EXISTS ${P}locks, ${P}runs, ${P}claims, $shed" >/dev/null 2>&1
  else
    server_sql "DROP SCHEMA IF EXISTS $schema CASCADE; DROP OWNED BY $app; DROP ROLE IF EXISTS $app; DROP ROLE IF EXISTS $maker" >/dev/null 2>&1
  fi
}
trap 'drop_account; e2e_cleanup' EXIT

# The DBA's script, both table formats, applied twice with the server's own client.
ddl() { dblock --table-format shedlock --table "$shed" schema --dialect "$backend"; }
ddl >"$E2E_TMP/ddl.sql"
if [ "$backend" = postgres ]; then
  check "the DDL is one transaction" bash -c 'grep -qx "BEGIN;" "$1" && [ "$(tail -n 1 "$1")" = "COMMIT;" ]' _ "$E2E_TMP/ddl.sql"
  server_sql "CREATE SCHEMA $schema" >/dev/null || fail "CREATE SCHEMA $schema"
else
  check "the DDL says why it has no transaction" grep -q "^-- No BEGIN/COMMIT: mysql commits each CREATE TABLE on its own" "$E2E_TMP/ddl.sql"
fi
check "the DDL is commented" grep -q "^-- ${P}runs: the history" "$E2E_TMP/ddl.sql"
check "the DDL makes the (name, id) index" grep -q "${P}runs_name_id" "$E2E_TMP/ddl.sql"
check "the DDL makes the failover record" grep -q "'failover'" "$E2E_TMP/ddl.sql"
assert_status "the DDL applies" 0 admin "$(cat "$E2E_TMP/ddl.sql")"
assert_status "and applies again (idempotent)" 0 admin "$(cat "$E2E_TMP/ddl.sql")"
record="strategy = 'failover'"
assert_eq "one failover record" 1 "$(admin "SELECT COUNT(*) FROM ${P}locks WHERE $record")"

# The application's user: rows only.
tables="${P}locks, ${P}runs, ${P}claims, $shed"
if [ "$backend" = mysql ]; then
  grants="CREATE USER '$app'@'127.0.0.1' IDENTIFIED BY '$pw';"
  for t in ${tables//,/}; do grants+=" GRANT SELECT, INSERT, UPDATE, DELETE ON $t TO '$app'@'127.0.0.1';"; done
  admin "$grants" >/dev/null || fail "create the account"
  grant() { admin "GRANT $1 ON $2 TO '$app'@'127.0.0.1'" >/dev/null; }
  revoke() { admin "REVOKE $1 ON $2 FROM '$app'@'127.0.0.1'" >/dev/null; }
else
  admin "CREATE ROLE $app LOGIN PASSWORD '$pw'; GRANT USAGE ON SCHEMA $schema TO $app;
         GRANT SELECT, INSERT, UPDATE, DELETE ON $tables TO $app" >/dev/null || fail "create the role"
  assert_eq "the role may not create in its schema" f "$(admin "SELECT has_schema_privilege('$app', '$schema', 'CREATE')")"
  grant() { admin "GRANT $1 ON $2 TO $app" >/dev/null; }
  revoke() { admin "REVOKE $1 ON $2 FROM $app" >/dev/null; }
fi
as_app() { DBLOCK_DSN=$app_dsn "$@"; }

assert_status "init by the application's user: the tables are there, nothing to make" 0 as_app dblock -q init
# Tables of a prefix the DBA did not make: 78, naming the table (PostgreSQL: and who makes it;
# MariaDB hides a table the user has no right to, errno 1142, so no CREATE is even tried).
out=$(DBLOCK_TABLE_PREFIX="${P}none_" as_app dblock run "$(key none)" -- true 2>&1)
assert_eq "no tables: a run is refused (78)" 78 $?
if [ "$backend" = postgres ]; then
  why="cannot create the dblock table ${P}none_locks in .*a user who may create tables makes them"
else
  why="command denied to user .* for table .*${P}none_locks.* (errno 1142)"
fi
check "it names the table" grep -q "$why" <<<"$out"
for s in lease advisory for-update txn-insert; do
  k=$(key "$s")
  assert_status "$s: run" 0 as_app dblock -s "$s" run "$k" -- true
  assert_status "$s: run again (--min-interval 0)" 0 as_app dblock -s "$s" run --min-interval 0 "$k" -- true
  assert_status "$s: a semaphore run" 0 as_app dblock -s "$s" run --slots 2 "$k-sem" -- true
  assert_status "$s: status" 0 as_app dblock status "$k"
  assert_status "$s: history" 0 as_app dblock history "$k"
  assert_status "$s: check" 0 as_app dblock check "$k" --max-age 1h
  assert_status "$s: metrics" 0 as_app dblock metrics "$k"
  out=$(as_app dblock -s "$s" doctor 2>&1)
  assert_eq "$s: doctor passes" 0 $?
  check "$s: doctor's privileges line: no CREATE, a DBA makes the tables" \
    grep -q "^ok    privileges: .*no CREATE privilege seen, so a DBA makes the tables" <<<"$out"
  if [ "$s" != lease ]; then
    # Who may end whose session (release --force): this user, its own only.
    [ "$backend" = mysql ] && line="^ok    processlist: without PROCESS and CONNECTION ADMIN (or SUPER) release --force sees and ends only this account's sessions"
    [ "$backend" = postgres ] && line="^ok    terminate: role $app may end only its own sessions"
    check "$s: doctor says release --force ends only this user's sessions" grep -q "$line" <<<"$out"
  fi
  # release --force of this user's own holder (a session strategy's: its session is ended).
  rm -f "$E2E_TMP/held"
  start_bg holder env DBLOCK_DSN="$app_dsn" dblock -s "$s" run "$k" -- sh -c "touch '$E2E_TMP/held'; exec sleep 30"
  wait_for 10 test -e "$E2E_TMP/held" || fail "$s: the holder did not start"
  assert_status "$s: release --force of the holder" 0 as_app dblock -q release "$k" --force
  wait_exit rc "$holder" 20
  assert_eq "$s: the holder lost its lock (76)" 76 "$rc"
done
k=$(key lease)
token=$(as_app dblock acquire "$k" --owner me --ttl 30s)
assert_eq "acquire" 0 $?
assert_status "renew" 0 as_app dblock -q renew "$k" --owner me --ttl 30s
assert_status "release" 0 as_app dblock -q release "$k" --token "$token"
assert_status "ShedLock's table: run" 0 as_app dblock --table-format shedlock --table "$shed" run "$(key shed)" -- true
assert_status "ShedLock's table: status" 0 as_app dblock --table-format shedlock --table "$shed" status "$(key shed)"
assert_status "ShedLock's table: doctor" 0 as_app dblock --table-format shedlock --table "$shed" doctor

# doctor names the one privilege revoked.
names_missing() {
  local name=$1 strategy=$2 privilege=$3 table=$4 out status=0
  out=$(as_app dblock -s "$strategy" doctor 2>&1) || status=$?
  assert_eq "$name: doctor fails (78)" 78 "$status"
  if grep -q "^FAIL  privileges: missing for $strategy: $privilege on $table (" <<<"$out"; then pass "$name: doctor names $privilege on $table"
  else fail "$name: doctor names $privilege on $table: $(grep privileges <<<"$out")"; fi
}
revoke DELETE "${P}runs"
names_missing "DELETE revoked" lease DELETE "${P}runs"
grant DELETE "${P}runs"
revoke INSERT "${P}claims"
names_missing "INSERT on claims revoked" txn-insert INSERT "${P}claims"
out=$(as_app dblock -s advisory doctor 2>&1)
assert_eq "advisory needs nothing of the claims table: doctor passes" 0 $?
grep FAIL <<<"$out" | sed "s/^/    | /"
grant INSERT "${P}claims"
if [ "$backend" = postgres ]; then
  revoke UPDATE "${P}claims"
  names_missing "UPDATE on claims revoked (SELECT ... FOR UPDATE)" for-update UPDATE "${P}claims"
  grant UPDATE "${P}claims"
fi
assert_status "doctor passes again" 0 as_app dblock -q doctor

# A table an older dblock made: no slots column.
k=$(key old)
assert_status "a run before the column goes (its command fails: 1)" 1 as_app dblock run "$k" -- false
admin "ALTER TABLE ${P}locks DROP COLUMN slots" >/dev/null || fail "drop the column slots"
for cmd in "status" "status $k" "status --json $k" "history" "history $k" "metrics" "metrics $k"; do
  assert_status "older table: $cmd" 0 as_app dblock $cmd
done
assert_eq "older table: status reads the row" "1 1" "$(DBLOCK_DSN=$app_dsn status_field "$k" token last_exit_code)"
assert_status "older table: check (the last run failed: CRITICAL)" 2 as_app dblock check "$k" --max-age 1h
assert_status "older table: a plain run" 0 as_app dblock run "$k" -- true
out=$(as_app dblock run --slots 2 "$k-sem" -- true 2>&1)
assert_eq "older table: a semaphore run is refused (78)" 78 $?
check "it names the missing column and the ALTER" grep -q "lacks the column slots, which could not be added .* runs: ALTER TABLE" <<<"$out"
check "it never tried CREATE" bash -c '! grep -qi "create" <<<"$1"' _ "$out"
if [ "$backend" = postgres ]; then
  assert_status "the DDL applied again adds the column" 0 admin "$(ddl)"
else
  assert_status "the column added by a user who may (dblock init)" 0 dblock -q init
fi
assert_status "the semaphore run then works" 0 as_app dblock run --slots 2 "$k-sem" -- true

# CREATE granted through a role: doctor asks the server (doctor.can_create), so it counts, where
# MariaDB's information_schema, which doctor read, shows none ("no CREATE privilege seen").
if [ "$backend" = mysql ]; then
  db=${rest#*/}
  db=${db%%\?*}
  # With the rows' privileges on every table too: MariaDB refuses a table the account may not
  # read as denied (1142), where a missing one is missing (1146).
  admin "CREATE ROLE $maker; GRANT CREATE, SELECT, INSERT, UPDATE, DELETE ON \`$db\`.* TO $maker; GRANT $maker TO '$app'@'127.0.0.1';
         SET DEFAULT ROLE $maker FOR '$app'@'127.0.0.1'" >/dev/null || fail "grant CREATE through a role"
else
  admin "CREATE ROLE $maker; GRANT CREATE ON SCHEMA $schema TO $maker; GRANT $maker TO $app" >/dev/null ||
    fail "grant CREATE through a role"
fi
out=$(as_app dblock doctor 2>&1)
check "CREATE through a role: doctor sees it" grep -q "^ok    privileges: .*; CREATE too$" <<<"$out"
out=$(DBLOCK_TABLE_PREFIX="${P}none_" as_app dblock doctor 2>&1)
check "no tables yet: doctor says the first run makes them" \
  grep -q "^ok    privileges: the dblock tables do not exist yet; the CREATE privilege lets the first run" <<<"$out"
check "and doctor made no table" bash -c '! grep -q "doctor_probe" <<<"$1"' _ "$(admin "SELECT table_name FROM information_schema.tables WHERE table_name LIKE '%doctor_probe'")"
finish

#!/usr/bin/env bash
# Two hosts whose search_path differ (one DSN with options=-csearch_path=..., or a role with a
# schema of its own, "$user" being first in PostgreSQL's default search_path) would find two
# <prefix>locks tables in one database: two holders of every key under lease, for-update and
# txn-insert, and advisory's tokens counted twice. dblock never makes that second table: a
# run, acquire or init whose search_path would make it while another schema has one is refused
# (78), whatever the strategy; another --table-prefix stays a lock database of its own. So is
# a ShedLock table made beside dblock's while the Java services' is in another schema.
source "$(dirname "$0")/lib.sh"

command -v psql >/dev/null || skip_or_fail "no psql to make a schema with"
schema="${DBLOCK_TABLE_PREFIX}s"
sep='?'
[[ $DBLOCK_DSN == *\?* ]] && sep='&'
other="$DBLOCK_DSN${sep}options=-csearch_path%3D$schema"
server_sql "CREATE SCHEMA $schema" >/dev/null || fail "CREATE SCHEMA $schema"
here=$(server_sql "SELECT current_schema()")
shown=$(sed -E 's#(://[^:/@]*):[^@]*@#\1:****@#' <<<"$DBLOCK_DSN")  # as messages show it
tables_in() { server_sql "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = '$1' AND c.relname LIKE '${DBLOCK_TABLE_PREFIX}%' AND c.relkind = 'r'"; }

k=$(key path)
start_bg holder dblock -s lease run "$k" -- sh -c "echo here >>'$E2E_TMP/ran'; sleep 3"
wait_for 5 test -s "$E2E_TMP/ran" || fail "the holder never started"
for s in lease advisory for-update txn-insert; do
  assert_status "$s: run whose search_path would make a second table is refused" 78 \
    dblock -d "$other" -s "$s" run "$k" -- sh -c "echo $s >>'$E2E_TMP/ran'"
done
wait_exit rc "$holder"
assert_eq "the holder ran to the end" 0 "$rc"
assert_eq "only the holder's command ran" here "$(cat "$E2E_TMP/ran")"
expect_line "acquire" 78 \
  "dblock: '$k': table ${DBLOCK_TABLE_PREFIX}locks is in schema $here of $shown${sep}options=-csearch_path%3D$schema, and this connection's search_path would make a second one in schema $schema: hosts on the two would not exclude each other (refused). Give every host the same search_path (options=-csearch_path%3D$here in the DSN, or ALTER ROLE ... SET search_path), or another --table-prefix for locks of their own" \
  dblock -d "$other" -s lease acquire "$k"
assert_status "init is refused too" 78 dblock -d "$other" init
assert_eq "no table was made in $schema" 0 "$(tables_in "$schema")"

assert_status "another --table-prefix in $schema is a lock database of its own" 0 \
  dblock -d "$other" --table-prefix "${DBLOCK_TABLE_PREFIX}own_" run "$k" -- true
assert_status "the same search_path as the tables' runs" 0 \
  dblock -d "$DBLOCK_DSN${sep}options=-csearch_path%3D$here" run "$k" -- true

# ShedLock's table, made by the Java side in $schema: dblock on the default search_path would
# make another one, which no Java service locks.
shed="${DBLOCK_TABLE_PREFIX}java"
server_sql "CREATE TABLE $schema.$shed (name VARCHAR(64) NOT NULL, lock_until TIMESTAMP NOT NULL,
  locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))" >/dev/null || fail "the Java side's table"
assert_status "a ShedLock table in another schema is not made again" 78 \
  dblock --table-format shedlock --table "$shed" run "$k" -- true
assert_eq "no second ShedLock table" 0 "$(server_sql "SELECT count(*) FROM pg_class WHERE relname = '$shed' AND relnamespace <> '$schema'::regnamespace")"
assert_status "on the Java side's search_path it is one lock" 0 \
  dblock -d "$other" --table-prefix "${DBLOCK_TABLE_PREFIX}own_" --table-format shedlock --table "$shed" run "$k" -- true

# A table made in another schema by whoever held the DDL's turn while this run waited for it:
# the first read saw nothing anywhere, so the run is refused on its read after its CREATE, in
# its turn, and that CREATE is rolled back (nothing is left in $here).
turn="${DBLOCK_TABLE_PREFIX}turn_"
turn_lock=$(dblock --table-prefix "$turn" schema --statements --dialect postgres |
  sed -nE 's/.*pg_advisory_xact_lock\((-?[0-9]+)\).*/\1/p' | head -n 1)
[ -n "$turn_lock" ] || fail "no DDL turn lock in the listing of schema.begin"
start_bg maker timeout 30 psql "$E2E_SQL_DSN" -X -q -v ON_ERROR_STOP=1 -c "BEGIN" \
  -c "SELECT pg_advisory_xact_lock($turn_lock)" -c "CREATE TABLE $schema.${turn}locks (name text PRIMARY KEY)" \
  -c "SELECT pg_sleep(2)" -c "COMMIT"
maker_waits() {
  [ "$(server_sql "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(2)' AND state = 'active'")" = 1 ]
}
wait_for 10 maker_waits || fail "the table's maker never held the DDL's turn"
assert_status "a run whose turn came after another schema's table was made is refused" 78 \
  dblock --table-prefix "$turn" -s lease run "$k" -- true
wait_exit rc "$maker"
assert_eq "the other schema's table was made" 0 "$rc"
assert_eq "the refused run left no table in $here" 0 \
  "$(server_sql "SELECT count(*) FROM pg_class WHERE relname = '${turn}locks' AND relnamespace = '$here'::regnamespace")"

server_sql "DROP TABLE IF EXISTS $here.$shed" >/dev/null 2>&1
server_sql "DROP SCHEMA $schema CASCADE" >/dev/null 2>&1
finish

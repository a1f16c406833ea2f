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

server_sql "DROP TABLE IF EXISTS $here.$shed" >/dev/null 2>&1
server_sql "DROP SCHEMA $schema CASCADE" >/dev/null 2>&1
finish

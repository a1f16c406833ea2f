#!/usr/bin/env bash
# --table-format shedlock on PostgreSQL with a --table that has capitals: ShedLock's JDBC
# provider writes the name unquoted, so PostgreSQL folds it (its services lock in
# "shedlocktable"), while dblock quotes it, which made a second table: dblock ran while a
# Java service held the name. Refused (78), naming the folded name, which shares the lock.
source "$(dirname "$0")/lib.sh"

command -v psql >/dev/null || skip_or_fail "no psql for the Java side"
T="${DBLOCK_TABLE_PREFIX}ShedLock"
folded=$(tr 'A-Z' 'a-z' <<<"$T")
k=$(key java)
# The Java side: ShedLock's documented DDL and insert, unquoted, as its provider sends them.
server_sql "CREATE TABLE $T (name VARCHAR(64) NOT NULL, lock_until TIMESTAMP NOT NULL, locked_at TIMESTAMP NOT NULL,
  locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name));
  INSERT INTO $T (name, lock_until, locked_at, locked_by) VALUES ('$k', timezone('utc', CURRENT_TIMESTAMP) + interval '1 hour',
  timezone('utc', CURRENT_TIMESTAMP), 'javahost')" >/dev/null || fail "the Java side's table"

expect_line "--table with capitals" 78 \
  "dblock: '$k': --table $T: ShedLock writes its table's name unquoted, which PostgreSQL folds to lower case, so its services lock in $folded, not in this table; use --table $folded" \
  dblock --table-format shedlock --table "$T" run "$k" -- sh -c "echo ran >>'$E2E_TMP/ran'"
assert_status "the folded name is the Java service's lock: busy" 75 \
  dblock --table-format shedlock --table "$folded" run "$k" -- sh -c "echo ran >>'$E2E_TMP/ran'"
assert_eq "nothing ran while the Java service held the name" "" "$(cat "$E2E_TMP/ran" 2>/dev/null)"
assert_eq "no second, quoted table" 0 "$(server_sql "SELECT count(*) FROM pg_class WHERE relname = '$T'")"

server_sql "DROP TABLE IF EXISTS $T; DROP TABLE IF EXISTS \"$T\"" >/dev/null 2>&1
finish

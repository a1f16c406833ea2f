#!/usr/bin/env bash
# cells: (mysql|postgres):.*
# A table lock says nothing about a key. While a DDL waits for the strategy's table (a farm's
# first run creating the tables on another host, a DBA's ALTER TABLE or VACUUM FULL queued behind
# a long read), a run of a key nobody holds waits for the table and runs: it does not exit 75,
# "held by someone else", which a cron job with -E 0 reads as "another host ran it". (MariaDB's
# NOWAIT and PostgreSQL's lock_timeout of 1 ms for a run that must not wait made it so once:
# e2e.mysql.for-update.new_keys_at_once saw it on fresh tables.)
source "$(dirname "$0")/lib.sh"

s=$DBLOCK_STRATEGY
locks=${DBLOCK_TABLE_PREFIX}locks claims=${DBLOCK_TABLE_PREFIX}claims
# The table this strategy's take locks.
table=$locks
case "$s" in for-update | txn-insert) table=$claims ;; esac

assert_status "$s: a first run makes the tables" 0 dblock run "$(key first)" -- true

# ddl_behind_reader: a session reads both tables for 2 s; another queues a DDL (an exclusive
# table lock) on $table behind it, which holds up every later statement on that table.
ddl_behind_reader() {
  case "$DBLOCK_TEST_BACKEND" in
    mysql)
      server_sql "START TRANSACTION; SELECT COUNT(*) FROM \`$locks\`; SELECT COUNT(*) FROM \`$claims\`;
                  SELECT SLEEP(2); COMMIT" >/dev/null &
      remember_pid $!
      sleep 0.5
      server_sql "ALTER TABLE \`$table\` COMMENT = 'e2e'" >/dev/null &
      remember_pid $!
      ;;
    postgres)
      server_sql "BEGIN; SELECT count(*) FROM \"$locks\"; SELECT count(*) FROM \"$claims\";
                  SELECT pg_sleep(2); COMMIT" >/dev/null &
      remember_pid $!
      sleep 0.5
      server_sql "BEGIN; LOCK TABLE \"$table\" IN ACCESS EXCLUSIVE MODE; COMMIT" >/dev/null &
      remember_pid $!
      ;;
  esac
  sleep 0.5
}

k=$(key free)
ddl_behind_reader
start=$(now_ms)
dblock run "$k" -- touch "$E2E_TMP/ran" 2>"$E2E_TMP/err"
rc=$?
took=$(($(now_ms) - start))
assert_eq "$s: a run of a free key while a DDL waits for $table exits 0 ($(head -c 300 "$E2E_TMP/err"))" 0 "$rc"
check "$s: its command ran" test -e "$E2E_TMP/ran"
assert_between "$s: it waited for the table, then ran (ms)" 0 15000 "$took"
wait
assert_status "$s: the key is free again" 0 is_free "$k"

finish

#!/usr/bin/env bash
# The parameters core binds as integers reach PostgreSQL as int8, declared by its connection
# (sql::integer_parameter), where every statement had cast them in its text: also in a statement
# parsed ahead of its values and then run by name, a lease waiter's next take (made ready while
# it waits). Its --min-interval of 30 days is more milliseconds than a 32-bit integer holds, the
# type the server gives that parameter undeclared (a take parsed so fails by name: out of range).
source "$(dirname "$0")/lib.sh"

command -v psql >/dev/null || skip_or_fail "no psql to lock a row with"
locks="${DBLOCK_TABLE_PREFIX}locks"
k=$(key typed)
assert_status "the key's first run" 0 dblock -s lease run "$k" -- true
server_sql "UPDATE $locks SET last_started_at = now() - interval '60 days' WHERE name = '$k'" >/dev/null ||
  fail "moving the key's last start back"

# The key's row locked by another transaction for 2 s: the waiter's takes (SKIP LOCKED) are
# refused until it commits, so the waiter's next takes run by name.
start_bg locker timeout 30 psql "$E2E_SQL_DSN" -X -q -o /dev/null -v ON_ERROR_STOP=1 -c "BEGIN" \
  -c "SELECT name FROM $locks WHERE name = '$k' FOR UPDATE" -c "SELECT pg_sleep(2)" -c "COMMIT"
locked() {
  [ "$(server_sql "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(2)' AND state = 'active'")" = 1 ]
}
wait_for 10 locked || fail "the row was never locked"
assert_status "a waiter with --min-interval 30d takes the key once the row is let go" 0 \
  dblock -s lease run "$k" -w 20s --min-interval 30d -- true
wait_exit rc "$locker"
assert_eq "the row's locker ended well" 0 "$rc"
assert_eq "the waiter's run is in the history" 2 "$(history_field "$k" runs.#)"
finish

#!/usr/bin/env bash
# dblock schema --statements [--dialect D]: every statement dblock runs there, named, one clause
# per line, for a DBA to review; no line is wider than 101 columns outside a string literal
# (with the default table prefix: a longer one widens the lines that name tables), and no
# statement longer than a DBA reads in a minute: 50 lines (dblock(1), schema). The statements
# still above it are named below with the lines they have now, which they may only lose (none
# is PostgreSQL's now; its lease take was: a failover gate, an update, an insert, the handoff
# lock and why it was refused in one round trip; postgres_statements.cpp): MariaDB's row-lock
# numbering (lock.row_numbered, below) and its numbered advisory take (the
# holder's idle limits, a failover gate, the lock, then the keyed-table check and the token's
# upsert in one block and round trip, or the holder's row when the lock is refused;
# mysql_statements.cpp), which spares every refused contender a round trip of its own, 0.82x
# its wall time at a 10 ms round trip (e2e.mysql_round_trips, "busy"). A refusal reads only the
# columns core reads of the row (its holder, its state, when it may start: not the last run's),
# which took the lease take from 62 lines to 57 (55 with the record's gate read in one row of
# `f`) and the advisory one from 93 to 90 (87 with the lock's name, answer and time set in
# statements of their own), and PostgreSQL's numbered advisory take without a wait from 56 to
# 50 (the key's row joined, not a derived table), under the bound. MariaDB's then 87 -> 84 (the
# keyed-table check once the lock is taken, the grant's time the upsert's own) -> 78 (the lock's
# name from its hash in two steps, the failover gate's check of the session without the case
# core never sends it) -> 75 (the block's error handler on one line, SIGNAL's SET not a clause).
# PostgreSQL's row-lock waiter's numbering that proves the grant it follows with status's own
# judgement of a session holder (lock.row_numbered, core's lock_statements) came under it at 50
# (51 before): that judgement compares the lock with the key's hash as a scalar subquery, not a
# derived table joined to pg_locks. PostgreSQL's lease take then 55 -> 54: the taken row's times
# converted in its final select list, not in a part of their own; -> 53: the failover record's
# read (`f`) lists its long column first, so the short one shares its line; -> 51: a list item
# after a short one that began its line (SELECT token,) shares that line where it fits, long or
# not (every dialect's listing only loses lines by it: SQLite 2, MySQL 8, PostgreSQL 5).
# MariaDB's row-lock numbering that proves its grant (lock.row_numbered, core's: the same
# judgement, its CASE over both kinds of holder's lock name 26 lines, then MariaDB's own
# session.take, which reads the failover gate, in a block) is over it. Then 76 -> 68: that
# judgement names either lock around one hash of the key (the label, digits and tag chosen by
# the strategy: 18 lines, status and release.holder 7 fewer each), IS TRUE where a COALESCE
# took a line; MariaDB's numbered advisory take 75 -> 74 (the gate's check of the session one
# group). What is left over 50 there is session.take's upsert (30 lines, the @took IF() of each
# column) with its gate read and the keyed-table check. Then 68 -> 64 and 74 -> 73: that gate
# read asks for the key as 'name1' IN (the table's unique keys), closed without it (core's own
# read of the record then fails, 1242: exit 78), where a scalar subquery of two rows made it
# fail (8 lines -> 5); and an update writes a bound parameter or UTC_TIMESTAMP(6) itself where
# it wrote VALUES(column) (session.take 46 -> 42, MariaDB's lease take 46 -> 43). Then every
# dialect's rule of one strategy per key (rows::strategy_allows_sql) reads a row of no strategy
# as the take's own in one comparison, COALESCE(strategy, :strategy) = :strategy, where it asked
# IS NULL OR = (no listing gains a line): PostgreSQL's lease take 51 -> 50, under the bound
# (row_numbered and advisory_numbered_try 50 -> 49); MariaDB's 64 -> 63 and 73 -> 72. Then
# MariaDB's numbered advisory take 72 -> 70: its own variables short (@lock, @got, @fence), the
# key's bytes set apart from their hash (the lock's name two lines where it took four); and
# 70 -> 69, 63 -> 62: session.take's columns in the order that gives every listing the fewest
# lines (the holder, its times, the token, then the rest; MariaDB's @took tests the condition
# once, so the order is free), PostgreSQL's row_numbered 49 -> 48 and session.take 20 -> 19.
# Then MariaDB's row_numbered 62 -> 44, under the bound: its proof is the holder tag's holder
# (IS_USED_LOCK(:held) = :lock_session, the name and id bound by the lock session), where it
# re-derived the tag's name from the key's hash in status's judgement (19 lines); the tag is
# taken with the row's lock, so it proves as much. PostgreSQL's listing is unchanged.
# Then MariaDB's numbered advisory take 69 -> 66: its read of the record is the takes' gate,
# which asks for the name's key (closed without it: exit 78), where it asked once the lock was taken.
# Then MariaDB's lease take 43 -> 46: it answers the taken row's times in its own columns (the
# takes are one shape, session.take's too), where core read them from the refusal's.
source "$(dirname "$0")/lib.sh"

max_lines=50
declare -A over=(
  ["mysql lock.advisory_numbered_wait"]=66
)

# "<lines> <id>" of each statement of the listing on stdin.
statement_lines() {
  awk '/^-- / { if (id != "") print n, id; id = substr($0, 4); n = 0; next }
       id != "" && NF { n++ }
       END { if (id != "") print n, id }'
}

for dialect in sqlite mysql postgres; do
  out=$(dblock --table-prefix dblock_ schema --statements --dialect "$dialect")
  assert_eq "$dialect: exits 0" 0 $?
  for id in lease.take lease.release history.add history.oldest history.trim inspect.status_all shedlock.take; do
    check "$dialect: names $id" grep -qx -- "-- $id" <<<"$out"
  done
  # A server's release and its history row in one statement, and a session strategy's history
  # row with its trim: what every run there sends (the listing had left them out).
  if [ "$dialect" != sqlite ]; then
    for id in lease.release_recorded history.record; do
      check "$dialect: names $id" grep -qx -- "-- $id" <<<"$out"
    done
  fi
  # The wait a lease waiter at the head sends ahead of its take (Waiters::ahead): MariaDB's on
  # the holder's wake name, PostgreSQL's on its handoff lock (they had been written in the
  # connections, unlisted).
  case $dialect in
    mysql) check "$dialect: names wake.wait_ahead" grep -qx -- "-- wake.wait_ahead" <<<"$out" ;;
    postgres) check "$dialect: names queue.wait_ahead" grep -qx -- "-- queue.wait_ahead" <<<"$out" ;;
  esac
  # The row-lock numbering chained to the grant (PostgreSQL's, MariaDB's) runs behind a gate of
  # the holder's own (lock.gate_*: taken, waited for by the bookkeeping session, given back),
  # core's over the session lock, its name bound (:gate), not written into the text (they had
  # been written in the holder sessions, unlisted), and MariaDB's bound too (:wait_ms), not a
  # number of seconds in the text.
  if [ "$dialect" != sqlite ]; then
    for id in lock.gate_take lock.gate_wait lock.gate_give; do
      check "$dialect: names $id" grep -qx -- "-- $id" <<<"$out"
    done
    gates=$(awk '/^-- / { on = ($0 ~ /^-- lock\.gate_/) } on' <<<"$out")
    assert_eq "$dialect: each gate statement binds :gate" 3 \
      "$(awk '/^-- / { id = $0 } /:gate/ && !(id in seen) { seen[id] = 1; n++ } END { print n + 0 }' <<<"$gates")"
    assert_eq "$dialect: no gate number written into a gate statement" "" \
      "$(grep -E 'lock\(-?[0-9]|LOCK\(:gate, [0-9]' <<<"$gates")"
  fi
  # PostgreSQL's connection declares the parameters core binds as integers (int8), so no
  # statement casts one in its text (Dialect::integer was PostgreSQL's ::bigint).
  if [ "$dialect" = postgres ]; then
    assert_eq "$dialect: no cast on a parameter core binds as an integer" "" \
      "$(grep -oE ':(token|fence|ttl_ms|min_hold_ms|min_interval_ms|pid|finished|keep|slack|lock|exit_code|started_ms|gate|run_pid|run_exit_code|started_id|slots|limit|hand|force|wait_ms|recount)::[a-z]+' <<<"$out" | sort -u | paste -sd' ')"
  fi
  check "$dialect: one clause per line (a WHERE starts a line)" grep -q "^WHERE name = :key" <<<"$out"
  # A type's words are not a clause: TIMESTAMP WITH TIME ZONE stays on one line (its WITH is not
  # a query's).
  assert_eq "$dialect: no line begins inside a type name" "" "$(grep -E '^ *WITH TIME ZONE' <<<"$out" | head -2)"
  # A block's error handler is its prologue, on one line; SIGNAL's SET is not an UPDATE's.
  assert_eq "$dialect: a block's handler and a SIGNAL on one line each" "" \
    "$(grep -E '^ *(RESIGNAL;|SET MYSQL_ERRNO)' <<<"$out" | head -2)"
  wide=$(sed "s/'[^']*'//g" <<<"$out" | awk 'length($0) > 101' | head -3)
  assert_eq "$dialect: no line wider than 101 columns outside its literals" "" "$wide"
  long=""
  while read -r lines id; do
    allowed=${over["$dialect $id"]:-$max_lines}
    ((lines > allowed)) && long+="$id: $lines lines (at most $allowed); "
  done < <(statement_lines <<<"$out")
  assert_eq "$dialect: no statement longer than $max_lines lines (or than it was, above it)" "" "$long"
done
# doctor.can_create is core's, one statement for both servers (asked of the server: each had
# read its own catalog), but for the identifier quote.
can_create() {
  dblock --table-prefix dblock_ schema --statements --dialect "$1" | awk '/^-- / { on = ($0 == "-- doctor.can_create") } on'
}
check "postgres: names doctor.can_create" grep -qx -- "-- doctor.can_create" <<<"$(can_create postgres)"
assert_eq "doctor.can_create: one statement for both servers" "$(can_create postgres)" "$(can_create mysql | tr '`' '"')"
# The DSN's dialect by default; without --statements, the DDL as before.
check "the DSN's dialect by default" grep -qx -- "-- lease.take" <<<"$(dblock schema --statements)"
check "schema alone still prints the DDL" grep -q "CREATE TABLE IF NOT EXISTS" <<<"$(dblock schema)"
finish

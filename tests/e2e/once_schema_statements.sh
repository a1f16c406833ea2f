#!/usr/bin/env bash
# dblock schema --statements [--dialect D]: every statement dblock runs there, named, one clause
# per line, for a DBA to review; no line is wider than 101 columns outside a string literal
# (with the default table prefix: a longer one widens the lines that name tables).
source "$(dirname "$0")/lib.sh"

for dialect in sqlite mysql postgres; do
  out=$(dblock --table-prefix dblock_ schema --statements --dialect "$dialect")
  assert_eq "$dialect: exits 0" 0 $?
  for id in lease.take lease.release history.add history.oldest history.trim inspect.status_all shedlock.take; do
    check "$dialect: names $id" grep -qx -- "-- $id" <<<"$out"
  done
  check "$dialect: one clause per line (a WHERE starts a line)" grep -q "^WHERE name = :key" <<<"$out"
  wide=$(sed "s/'[^']*'//g" <<<"$out" | awk 'length($0) > 101' | head -3)
  assert_eq "$dialect: no line wider than 101 columns outside its literals" "" "$wide"
done
# The DSN's dialect by default; without --statements, the DDL as before.
check "the DSN's dialect by default" grep -qx -- "-- lease.take" <<<"$(dblock schema --statements)"
check "schema alone still prints the DDL" grep -q "CREATE TABLE IF NOT EXISTS" <<<"$(dblock schema)"
finish

#!/usr/bin/env bash
# The longest TTL the CLI allows (100 years of 365 days) works on every backend and strategy:
# a holder session's idle limits (2 x TTL + 5 s) are clamped to what the server accepts
# (PostgreSQL: at most 2^31-1 ms, about 24.8 days; MariaDB: a year) or left off, never sent
# as a value the server refuses. 13d is the first TTL whose limit PostgreSQL refused before.
source "$(dirname "$0")/lib.sh"

assert_status "--ttl 36501d is refused as a usage error" 64 dblock run "$(key over)" --ttl 36501d -- true
# one_ttl TTL: a run with that TTL, on a key of its own; the TTLs run side by side.
one_ttl() {
  local ttl=$1 k pid rc=0
  k=$(key "ttl-$ttl")
  dblock run "$k" --ttl "$ttl" -- sleep 1.5 2>"$PART_TMP/err" &
  pid=$!
  remember_pid $pid
  check "--ttl $ttl: the run holds the key" wait_for 10 is_held "$k"
  wait "$pid" || rc=$?
  assert_eq "--ttl $ttl: the run exits 0" 0 "$rc"
  [ "$rc" = 0 ] || sed 's/^/      /' "$PART_TMP/err"
}
for ttl in 12d 13d 74d 75d 36500d; do
  in_parallel "$ttl" one_ttl "$ttl"
done
join_parallel
finish

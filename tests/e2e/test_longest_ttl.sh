#!/usr/bin/env bash
# The longest TTL the CLI allows (100 years of 365 days) works on every backend and strategy:
# a holder session's idle limits (2 x TTL + 5 s) are clamped to what the server accepts
# (PostgreSQL: at most 2^31-1 ms, about 24.8 days; MariaDB: a year) or left off, never sent
# as a value the server refuses. 13d is the first TTL whose limit PostgreSQL refused before.
source "$(dirname "$0")/lib.sh"

assert_status "--ttl 36501d is refused as a usage error" 64 dblock run "$(key over)" --ttl 36501d -- true
# The run's command lasts until the test has seen the key held (10 s at most), not a fixed 1.5 s.
for ttl in 12d 13d 74d 75d 36500d; do
  k=$(key "ttl-$ttl")
  seen=$E2E_TMP/seen-$ttl
  dblock run "$k" --ttl "$ttl" -- sh -c 'i=0; while [ ! -e "$0" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done' "$seen" \
    2>"$E2E_TMP/err" &
  pid=$!
  remember_pid $pid
  check "--ttl $ttl: the run holds the key" wait_for 10 is_held "$k"
  touch "$seen"
  rc=0
  wait "$pid" || rc=$?
  assert_eq "--ttl $ttl: the run exits 0" 0 "$rc"
  [ "$rc" = 0 ] || sed 's/^/      /' "$E2E_TMP/err"
done
finish

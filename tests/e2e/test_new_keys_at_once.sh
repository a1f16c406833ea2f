#!/usr/bin/env bash
# Keys that have never run, started at the same instant on a fresh table (a farm's first
# night, every job at 02:00): each key is free, so each run runs. None may be refused as "held
# by someone else" because another key's first run changed the failover record meanwhile
# (PostgreSQL lease: 8 of 60 runs were, before the take was retried after the gate).
source "$(dirname "$0")/lib.sh"

s=$DBLOCK_STRATEGY
rounds=6 keys=5
base=$DBLOCK_TABLE_PREFIX
for r in $(seq $rounds); do
  export DBLOCK_TABLE_PREFIX=${base}n${r}_
  [ $((r % 2)) = 0 ] && { dblock init >/dev/null 2>&1 || fail "$s: init of round $r"; }
  rm -f "$E2E_TMP/go"
  for i in $(seq $keys); do
    (
      while [ ! -e "$E2E_TMP/go" ]; do sleep 0.01; done
      dblock run "$(key "r$r-k$i")" -- true 2>"$E2E_TMP/err.$r.$i"
      echo $? >"$E2E_TMP/rc.$r.$i"
    ) &
    remember_pid $!
  done
  sleep 0.3
  touch "$E2E_TMP/go"
  wait
done
runs=$((rounds * keys))
assert_eq "$s: $runs first runs of new keys started at once (half on a fresh table, half after init) all ran" \
  "$runs" "$(cat "$E2E_TMP"/rc.* | grep -cx 0)"
others=$(cat "$E2E_TMP"/rc.* | grep -vx 0 | sort | uniq -c | xargs)
[ -z "$others" ] || echo "      $s: other exits: $others; $(cat "$E2E_TMP"/err.* | sort | uniq -c | head -n 3)"
finish

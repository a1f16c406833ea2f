#!/usr/bin/env bash
# Two slot counts of one key never hold at once (dblock(1), SEMAPHORES): `--slots 1` and
# `--slots 3`, `--slots 3` and `--slots 2`, a plain run and `--slots 2`, started close together.
# The second is refused (78, or 75 when busy) or runs after the first: never beside it.
#   held:   another transaction holds the key's row locked for 2.5 s while the two start, so
#           both wait on it and are let in one right after the other (on PostgreSQL under READ
#           COMMITTED the second one's check of the slot rows used to read a snapshot from
#           before its wait, and missed the slot just committed);
#   rounds: the two released at once by a barrier, on a key that is new, a semaphore of a
#           third count, or a free plain lock.
# The oracle is semaphore_job.sh with one slot: a job that finds the key's flock(2) file held
# by the other job says so in its directory's `over`.
source "$(dirname "$0")/lib.sh"

s=$DBLOCK_STRATEGY
JOB=$FAULTS_DIR/semaphore_job.sh
locks=${DBLOCK_TABLE_PREFIX}locks
dblock init >/dev/null 2>&1 || true

# count_opt N: the run option of slot count N (0: a plain lock).
count_opt() { [ "$1" = 0 ] && echo "" || echo "--slots $1"; }
label() { [ "$1" = 0 ] && echo plain || echo "--slots $1"; }

# start_run DIR NAME COUNT KEY SECONDS [GO]: a background run of the oracle job, its exit status
# in DIR/NAME.rc, its stderr in DIR/NAME.err; with GO, it starts once the file GO exists.
start_run() {
  local dir=$1 name=$2 count=$3 k=$4 secs=$5 go=${6:-}
  (
    if [ -n "$go" ]; then while [ ! -e "$go" ]; do sleep 0.005; done; fi
    # shellcheck disable=SC2046
    dblock run $(count_opt "$count") --ttl 10s "$k" -- "$JOB" "$dir" 1 "$secs" 2>"$dir/$name.err"
    echo $? >"$dir/$name.rc"
  ) &
  remember_pid $!
}

# hold_row KEY SECONDS: in the background, a transaction of the server's own client that holds
# KEY's row locked for SECONDS, as a DBA's or another tool's would.
hold_row() {
  case "$DBLOCK_TEST_BACKEND" in
    postgres) server_sql "BEGIN; SELECT 1 FROM $locks WHERE name = '$1' FOR UPDATE; SELECT pg_sleep($2); COMMIT" ;;
    mysql) server_sql "START TRANSACTION; SELECT 1 FROM $locks WHERE name = '$1' FOR UPDATE; DO SLEEP($2); COMMIT" ;;
  esac >/dev/null &
  remember_pid $!
}

# judge NAME DIR COUNT_A COUNT_B: both runs ended with 0, 75 or 78, at least one ran, and
# never both at once (an overlap also counts in $overlaps). Sets $both when both ran, one after
# the other.
judge() {
  local name=$1 dir=$2 a b
  wait_for 30 test -s "$dir/a.rc" -a -s "$dir/b.rc" || fail "$name: a run did not end within 30 s"
  a=$(cat "$dir/a.rc" 2>/dev/null) b=$(cat "$dir/b.rc" 2>/dev/null)
  both=
  if [ -s "$dir/over" ]; then
    fail "$name: $(label "$3") (exit $a) and $(label "$4") (exit $b) ran at once"
    overlaps=$((overlaps + 1))
    return 1
  fi
  if [[ "$a $b" =~ ^(0|75|78)\ (0|75|78)$ ]] && [[ "$a $b" == *0* ]]; then
    [ "$a $b" = "0 0" ] && both=1
    return 0
  fi
  fail "$name: exit statuses $a and $b (expected 0, 75 or 78, and one 0): $(cat "$dir"/*.err | head -n 4 | tr '\n' ' ')"
  return 1
}

# The row held by another transaction while the two start, 0.6 s apart, each order. The four
# pairs use keys of their own and run side by side (one after the other they took 20 s).
overlaps=0
held_pairs=("1 3" "3 2" "0 2" "2 0")
for pair in "${held_pairs[@]}"; do
  read -r ca cb <<<"$pair"
  k=$(key "held-$ca-$cb")
  # The key's row exists, free: a plain lock when one of the two is plain (a semaphore's key
  # refuses it), else a semaphore of the second run's count, which the first one changes.
  first=$cb
  [ "$ca" = 0 ] && first=0
  # shellcheck disable=SC2046
  dblock run $(count_opt "$first") "$k" -- true || fail "$s held: $(label "$ca") then $(label "$cb"): the key's first run failed"
done
for pair in "${held_pairs[@]}"; do
  read -r ca cb <<<"$pair"
  hold_row "$(key "held-$ca-$cb")" 2.5
done
sleep 0.8
for pair in "${held_pairs[@]}"; do
  read -r ca cb <<<"$pair"
  mkdir -p "$E2E_TMP/held-$ca-$cb"
  start_run "$E2E_TMP/held-$ca-$cb" a "$ca" "$(key "held-$ca-$cb")" 1.5
done
sleep 0.6
for pair in "${held_pairs[@]}"; do
  read -r ca cb <<<"$pair"
  start_run "$E2E_TMP/held-$ca-$cb" b "$cb" "$(key "held-$ca-$cb")" 1.5
done
for pair in "${held_pairs[@]}"; do
  read -r ca cb <<<"$pair"
  name="$s held: $(label "$ca") then $(label "$cb")"
  dir=$E2E_TMP/held-$ca-$cb
  judge "$name" "$dir" "$ca" "$cb" && pass "$name: never both at once (exit $(cat "$dir/a.rc") and $(cat "$dir/b.rc"))"
done

# Rounds of the two released together.
ROUNDS=${ROUNDS:-10}
pairs=("1 3" "0 2" "3 2" "2 0")
setups=(new other plain)
ran_both=0
for ((r = 0; r < ROUNDS; r++)); do
  read -r ca cb <<<"${pairs[$((r % ${#pairs[@]}))]}"
  setup=${setups[$((r % ${#setups[@]}))]}
  k=$(key "round-$r")
  dir=$E2E_TMP/round-$r
  mkdir -p "$dir"
  case $setup in
    other) dblock run --slots 5 "$k" -- true ;;
    plain) [ "$ca" = 0 ] || [ "$cb" = 0 ] || dblock run "$k" -- true ;;
  esac || fail "$s round $r: the key's first run failed"
  rm -f "$dir/go"
  start_run "$dir" a "$ca" "$k" 0.6 "$dir/go"
  start_run "$dir" b "$cb" "$k" 0.6 "$dir/go"
  sleep 0.2
  touch "$dir/go"
  judge "$s round $r ($setup key): $(label "$ca") and $(label "$cb")" "$dir" "$ca" "$cb"
  [ -n "$both" ] && ran_both=$((ran_both + 1))
done
assert_eq "$s: two counts never ran at once (4 held, $ROUNDS rounds; both ran one after the other in $ran_both)" 0 "$overlaps"

# Nothing is left held, and a semaphore that is idle takes a new count.
k=$(key round-0)
assert_status "$s: once idle, the key takes --slots 4" 0 dblock run --slots 4 "$k" -- true
finish

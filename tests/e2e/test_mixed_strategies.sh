#!/usr/bin/env bash
# One key, one way of locking it (dblock(1), --strategy; SHARING LOCKS WITH SHEDLOCK): a run
# whose --strategy or --table-format differs from the key's unreleased holder's is refused
# (78, naming both) and its command never runs, whichever comes first; two started together
# never overlap; a crashed holder's row refuses the other ways until `release --force`; two
# ShedLock tables (--table) and a semaphore's slot rows keep the rule too. This cell's strategy
# meets every other way its backend has (SQLite: the lease and --table-format shedlock).
source "$(dirname "$0")/lib.sh"

s=$DBLOCK_STRATEGY
T="${DBLOCK_TABLE_PREFIX}shedlock"
case "$DBLOCK_TEST_BACKEND" in
  sqlite) ways=(lease shedlock) ;;
  *) ways=(lease advisory for-update txn-insert shedlock) ;;
esac
others=()
for w in "${ways[@]}"; do [ "$w" = "$s" ] || others+=("$w"); done

# way_of WAY: dblock's options that lock the way WAY, in the array WAY.
way_of() {
  if [ "$1" = shedlock ]; then WAY=(--table-format shedlock --table "$T" -s lease); else WAY=(-s "$1"); fi
}
# by WAY ARGS...: dblock, locking the way WAY.
by() {
  local WAY
  way_of "$1"
  shift
  dblock "${WAY[@]}" "$@"
}
# The way as the message names it.
named() { if [ "$1" = shedlock ]; then echo "--table-format shedlock"; else echo "--strategy $1"; fi; }

dblock init >/dev/null 2>&1 || true
by shedlock init >/dev/null 2>&1 || true

# A holder that stays until told: its command marks $dir/started, waits for $dir/done.
hold_until_done() {
  local var=$1 k=$3 dir=$4 WAY
  way_of "$2"
  # dblock itself in the background (not a function's subshell): kill -9 must reach it.
  start_bg "$var" dblock "${WAY[@]}" run "$k" --ttl 30 -- sh -c \
    'touch "$0/started"; i=0; while [ ! -e "$0/done" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done' "$dir"
}

# holder_then_contender HOLDER_WAY CONTENDER_WAY: the contender is refused while the holder runs.
holder_then_contender() {
  local a=$1 b=$2 k dir holder rc hs err
  k=$(key "$a-$b")
  dir="$E2E_TMP/$a-$b"
  mkdir -p "$dir"
  hold_until_done holder "$a" "$k" "$dir"
  if ! wait_for 15 test -e "$dir/started"; then
    fail "$a holder of $k never started"
    return
  fi
  rc=0
  err=$(by "$b" run "$k" -- touch "$dir/contender-ran" 2>&1) || rc=$?
  touch "$dir/done"
  wait_exit hs "$holder" 30
  assert_eq "$a holder, $b contender: the contender exits 78" 78 "$rc"
  check "$a holder, $b contender: its command never ran" test ! -e "$dir/contender-ran"
  check "$a holder, $b contender: the message names both ways" \
    grep -qF -- "taken with $(named "$a") and not released" <<<"$err"
  check "$a holder, $b contender: ... and the asked one" grep -qF -- "this run asked for $(named "$b")" <<<"$err"
  assert_eq "$a holder, $b contender: the holder kept its lock (exit 0)" 0 "$hs"
  # Once the holder released it, the other way takes the key.
  assert_status "$a released, then $b takes the key" 0 by "$b" run "$k" -- true
}

# Both started together, a few rounds per pair: never two inside at once. The command holds a
# directory only one can make.
race_round() {
  local a=$1 b=$2 round=$3 k dir pa pb ra rb
  k=$(key "race-$a-$b-$round")
  dir="$E2E_TMP/race-$a-$b-$round"
  mkdir -p "$dir"
  local cmd='mkdir "$0/inside" || touch "$0/overlap"; touch "$0/ran.$1"; sleep 1; rmdir "$0/inside" 2>/dev/null'
  (while [ ! -e "$dir/go" ]; do sleep 0.01; done; by "$a" run "$k" -- sh -c "$cmd" "$dir" a) 2>/dev/null &
  pa=$!
  remember_pid $pa
  (while [ ! -e "$dir/go" ]; do sleep 0.01; done; by "$b" run "$k" -- sh -c "$cmd" "$dir" b) 2>/dev/null &
  pb=$!
  remember_pid $pb
  sleep 0.2
  touch "$dir/go"
  wait_exit ra $pa 30
  wait_exit rb $pb 30
  check "race $a/$b round $round: never both inside" test ! -e "$dir/overlap"
  check "race $a/$b round $round: one ran (exits $ra $rb)" bash -c "ls '$dir'/ran.* >/dev/null 2>&1"
  case "$ra $rb" in
    "0 0" | "0 75" | "75 0" | "0 78" | "78 0") pass "race $a/$b round $round: exit statuses $ra $rb" ;;
    *) fail "race $a/$b round $round: exit statuses $ra $rb" ;;
  esac
}
# Each other way on keys of its own, side by side (one after the other they took most of the
# test): the contender refused both ways round, then the races.
with_other() {
  local o=$1 round
  T="${DBLOCK_TABLE_PREFIX}shedlock"  # the part's own tables (in_parallel)
  holder_then_contender "$s" "$o"
  holder_then_contender "$o" "$s"
  for round in 1 2; do race_round "$s" "$o" "$round"; done
}
for o in "${others[@]}"; do
  in_parallel "$o" with_other "$o"
done

# A holder killed with -9 leaves its row unreleased: another way is refused (fail closed; a
# session holder's row cannot say whether its session is gone), and `release --force` lets it in.
o=${others[0]}
[ "$s" = lease ] && [ "$DBLOCK_TEST_BACKEND" != sqlite ] && o=advisory
k=$(key crashed)
dir="$E2E_TMP/crashed"
mkdir -p "$dir"
hold_until_done holder "$s" "$k" "$dir"
if wait_for 15 test -e "$dir/started"; then
  kill -KILL "$holder"
  wait "$holder" 2>/dev/null
  rc=0
  err=$(by "$o" run "$k" -- touch "$dir/contender-ran" 2>&1) || rc=$?
  assert_eq "crashed $s holder: a $o run exits 78" 78 "$rc"
  check "crashed $s holder: ... naming the fix" grep -qF -- "dblock release --force $k" <<<"$err"
  check "crashed $s holder: its command never ran" test ! -e "$dir/contender-ran"
  assert_status "crashed $s holder: release --force" 0 dblock release --force "$k"
  assert_status "crashed $s holder: then the $o run takes the key" 0 by "$o" run "$k" -- touch "$dir/contender-ran"
  check "crashed $s holder: ... and its command ran" test -e "$dir/contender-ran"
else
  fail "the $s holder of $k never started"
fi

# Two ShedLock tables (--table) on one prefix are two ShedLock rows but one dblock row: a
# dblock holder through one refuses a dblock run through the other.
if [ "$s" = lease ]; then
  k=$(key tables)
  dir="$E2E_TMP/tables"
  mkdir -p "$dir"
  hold_until_done holder shedlock "$k" "$dir"
  if wait_for 15 test -e "$dir/started"; then
    rc=0
    err=$(dblock --table-format shedlock --table "${T}2" run "$k" -- touch "$dir/contender-ran" 2>&1) || rc=$?
    touch "$dir/done"
    wait_exit hs "$holder" 30
    assert_eq "another --table: the contender exits 78" 78 "$rc"
    check "another --table: its command never ran" test ! -e "$dir/contender-ran"
    check "another --table: the message says so" grep -qF -- "every host must give the same --table" <<<"$err"
    assert_eq "another --table: the holder exits 0" 0 "$hs"
    assert_status "another --table: once released, the other table takes the name" 0 \
      dblock --table-format shedlock --table "${T}2" run "$k" -- true
  else
    fail "the shedlock holder of $k never started"
  fi
fi

# A semaphore's slot rows keep the rule too (lease and session strategies alike).
if [ "$DBLOCK_TEST_BACKEND" != sqlite ]; then
  o=${others[0]}
  [ "$o" = shedlock ] && o=${others[1]}
  k=$(key slots)
  dir="$E2E_TMP/slots"
  mkdir -p "$dir"
  start_bg holder dblock -s "$s" run --slots 1 "$k" --ttl 30 -- sh -c \
    'touch "$0/started"; i=0; while [ ! -e "$0/done" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done' "$dir"
  if wait_for 15 test -e "$dir/started"; then
    rc=0
    err=$(by "$o" run --slots 1 "$k" -- touch "$dir/contender-ran" 2>&1) || rc=$?
    touch "$dir/done"
    wait_exit hs "$holder" 30
    assert_eq "semaphore: $s slot holder, $o contender exits 78" 78 "$rc"
    check "semaphore: ... its command never ran" test ! -e "$dir/contender-ran"
    check "semaphore: ... the message names the key" grep -qF -- "'$k' is taken with $(named "$s")" <<<"$err"
    assert_eq "semaphore: the $s holder exits 0" 0 "$hs"
  else
    fail "the $s slot holder of $k never started"
  fi
fi

join_parallel
finish

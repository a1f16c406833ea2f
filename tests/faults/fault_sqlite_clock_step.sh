#!/usr/bin/env bash
# A wall-clock step (NTP, VM resume, `date -s`) must not split a SQLite lease, nor make
# --min-interval start a job early. libfaketime moves the wall clock of one process (holder or
# competitor) an hour forward or back, before it starts or while it holds the lease; the
# oracle's job reads the real clock, so the log shows whether two runs overlapped.
source "$(dirname "$0")/lib.sh"

libfaketime=""
for f in /usr/lib/*/faketime/libfaketime.so.1 /usr/lib/faketime/libfaketime.so.1 /usr/local/lib/faketime/libfaketime.so.1; do
  [ -e "$f" ] && { libfaketime=$f; break; }
done
if [ -z "$libfaketime" ]; then
  # The scenario is the fault itself: without it nothing was tested, so this is never a pass.
  echo "FAIL  libfaketime.so.1 not found (Debian package libfaketime, pulled in by faketime)"
  exit 1
fi

# faked OFFSET COMMAND...: the command sees the wall clock moved by OFFSET (e.g. +1h, -1h).
# DONT_FAKE_MONOTONIC keeps CLOCK_MONOTONIC/CLOCK_BOOTTIME real: a step moves only the wall
# clock, and a faked monotonic clock hangs pthread_cond_clockwait.
faked() {
  local offset=$1
  shift
  LD_PRELOAD=$libfaketime DONT_FAKE_MONOTONIC=1 FAKETIME=$offset "$@"
}

# stepping RCFILE COMMAND...: like faked, but the offset is read from RCFILE at every clock
# read, so the test can step the clock of a running process.
stepping() {
  local rc=$1
  shift
  LD_PRELOAD=$libfaketime DONT_FAKE_MONOTONIC=1 FAKETIME_TIMESTAMP_FILE=$rc FAKETIME_NO_CACHE=1 "$@"
}

# The fault must really be injected: a faked process sees the step, its boot clock does not.
real=$(date +%s)
ahead=$(faked +1h date +%s)
assert_between "libfaketime moves the wall clock an hour ahead" 3590 3610 $((ahead - real))

# holder_started LOG: the first job has logged its start.
holder_started() { [ -s "$1" ] && grep -q '^start' "$1"; }

# scenario NAME HOLDER_OFFSET COMPETITOR_OFFSET: the holder runs a 3 s job; once it has started,
# the competitor waits (-w 20) for the same key. Both must run, one after the other.
scenario() {
  local name=$1 hoff=$2 coff=$3 log=$E2E_TMP/$1.log k holder st=0 t0 waited
  k=$(key "$name")
  faked "$hoff" dblock "${fmt[@]}" run "$k" -- "$ORACLE_JOB" "$log" 3 &
  holder=$!
  remember_pid "$holder"
  if ! wait_for 10 holder_started "$log"; then
    fail "$name: the holder never started"
    return
  fi
  t0=$(now_ms)
  faked "$coff" dblock "${fmt[@]}" run -w 20 "$k" -- "$ORACLE_JOB" "$log" 0.2 || st=$?
  waited=$(($(now_ms) - t0))
  wait "$holder"
  assert_eq "$name: the competitor ran (exit status)" 0 "$st"
  echo "      $name: the competitor got the lock after $waited ms"
  oracle_check "$name: no overlap, tokens increase" "$log" 2
}

# The scenarios use keys of their own and run side by side (one after the other, 27 s), beside
# the checks below.
fmt=()  # dblock's options of the table format: none, the default format
# Forward step of the competitor: the holder's lease looks an hour overdue to it.
in_parallel competitor_ahead scenario competitor_ahead +0 +1h
# Backward step of the holder: the lease it writes ends an hour before the real end.
in_parallel holder_behind scenario holder_behind -1h +0
# Forward step of the holder: its lease must still end when it releases, not an hour later.
in_parallel holder_ahead scenario holder_ahead +1h +0
# Backward step of the competitor: a released lease must not look an hour in the future.
in_parallel competitor_behind scenario competitor_behind +0 -1h

# --table-format shedlock: ShedLock's lock_until is wall-clock time (its Java clients read it),
# and dblock's own row of the name holds the lease on CLOCK_BOOTTIME too, so a dblock competitor
# whose clock is ahead does not take a live lock, nor waits an hour for a released one.
shed_scenario() {
  fmt=(--table-format shedlock --table "${DBLOCK_TABLE_PREFIX}shedlock")  # the part's own tables
  scenario "$@"
}
in_parallel shedlock_competitor_ahead shed_scenario shedlock_competitor_ahead +0 +2m
in_parallel shedlock_holder_behind shed_scenario shedlock_holder_behind -1h +0
in_parallel shedlock_holder_ahead shed_scenario shedlock_holder_ahead +1h +0
in_parallel shedlock_competitor_behind shed_scenario shedlock_competitor_behind +0 -1h

# A step while the lease is held: the holder's clock jumps back an hour after it acquired, so
# its renewals (every TTL/3 = 2 s) write an expiry that is already an hour past for others.
rc=$E2E_TMP/step.rc
echo "+0" >"$rc"
log=$E2E_TMP/mid.log
k=$(key mid)
stepping "$rc" dblock run --ttl 6s --kill-after 1s "$k" -- "$ORACLE_JOB" "$log" 5 &
holder=$!
remember_pid "$holder"
if wait_for 10 holder_started "$log"; then
  echo "-1h" >"$rc"
  sleep 3  # past the first renewal
  st=0
  dblock run -w 20 "$k" -- "$ORACLE_JOB" "$log" 0.2 || st=$?
  hst=0
  wait "$holder" || hst=$?
  assert_eq "step back during the hold: the holder finished (exit status)" 0 "$hst"
  assert_eq "step back during the hold: the competitor ran after it (exit status)" 0 "$st"
  oracle_check "step back during the hold: no overlap, tokens increase" "$log" 2
else
  fail "step back during the hold: the holder never started"
fi

# --min-interval: a clock an hour ahead must not make an hourly job due again at once.
log=$E2E_TMP/interval.log
k=$(key interval)
assert_status "min-interval: the first run" 0 dblock run --min-interval 1h "$k" -- "$ORACLE_JOB" "$log" 0.1
assert_status "min-interval: a run an hour (of wall clock) later is not due" 75 \
  faked +2h dblock run --min-interval 1h "$k" -- "$ORACLE_JOB" "$log" 0.1
assert_status "min-interval: a run with the clock stepped back is not due" 75 \
  faked -2h dblock run --min-interval 1h "$k" -- "$ORACLE_JOB" "$log" 0.1
oracle_check "min-interval: one run" "$log" 1

# status and release agree with acquire: a faked-ahead status still sees the held lease, and a
# faked-behind `dblock release` of it frees it for everyone.
log=$E2E_TMP/status.log
k=$(key status)
token=$(dblock acquire "$k" --ttl 1m)
assert_status "status an hour ahead: still held" 0 faked +1h dblock status -q "$k"
assert_status "status an hour behind: still held" 0 faked -1h dblock status -q "$k"
assert_status "acquire an hour ahead: busy" 75 faked +1h dblock acquire "$k" --ttl 1m
assert_status "renew an hour behind" 0 faked -1h dblock renew "$k" --token "$token" --ttl 1m
assert_status "release an hour behind" 0 faked -1h dblock release "$k" --token "$token"
assert_status "status after the release: free" 1 dblock status -q "$k"
assert_status "acquire after the release" 0 dblock acquire "$k" --ttl 1m >/dev/null

# The same with --table-format shedlock: a `dblock renew` from another process extends the
# holder's boot lease with its lock_until, so an hour ahead it is still busy past the first TTL.
fmt=(--table-format shedlock --table "${DBLOCK_TABLE_PREFIX}shedlock")
k=$(key shedlock-renew)
token=$(dblock "${fmt[@]}" acquire "$k" --ttl 2s)
assert_status "shedlock: acquire an hour ahead: busy" 75 faked +1h dblock "${fmt[@]}" acquire "$k" --ttl 1m
assert_status "shedlock: renew" 0 dblock "${fmt[@]}" renew "$k" --token "$token" --ttl 1m
sleep 2.5  # past the acquisition's TTL
assert_status "shedlock: acquire an hour ahead after the renew: busy" 75 faked +1h dblock "${fmt[@]}" acquire "$k" --ttl 1m
assert_status "shedlock: release an hour behind" 0 faked -1h dblock "${fmt[@]}" release "$k" --token "$token"
assert_status "shedlock: acquire an hour behind after the release" 0 faked -1h dblock "${fmt[@]}" acquire "$k" --ttl 1m >/dev/null
join_parallel
finish

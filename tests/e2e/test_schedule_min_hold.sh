#!/usr/bin/env bash
# run --min-hold (ShedLock's lockAtLeastFor): a short job keeps the lock until min-hold after its
# start, so a host whose cron fires a little late skips instead of running the job again.
source "$(dirname "$0")/lib.sh"

# Two "hosts" 2 s apart: host-a's job ends after 1 s, but --min-hold 10s keeps the lock.
k=$(key twohosts)
ran="$E2E_TMP/ran"
start_bg a dblock run "$k" --owner host-a --min-hold 10s -- sh -c "echo \$DBLOCK_OWNER >>\"$ran\"; sleep 1"
check "host-a ran" wait_for 10 test -s "$ran"
sleep 2
start=$(now_ms)
assert_status "host-b, 2 s late, skips with the conflict code" 75 \
  dblock run "$k" --owner host-b --min-hold 10s -- sh -c "echo \$DBLOCK_OWNER >>\"$ran\""
dblock -v run "$k" --owner host-c --min-hold 10s -- sh -c "echo \$DBLOCK_OWNER >>\"$ran\"" 2>"$E2E_TMP/skip.err"
assert_eq "host-c skips too" 75 $?
assert_between "the skip is immediate" 0 5000 $(($(now_ms) - start))
assert_eq "exactly one host ran the job" "host-a" "$(cat "$ran")"
check "-v names the holder" grep -q "held by host-a" "$E2E_TMP/skip.err"
check "-v says since when" grep -q "since 20" "$E2E_TMP/skip.err"
if ! is_session_strategy; then
  # A lease is what holds during --min-hold: its expiry is start + 10 s, on the database clock.
  check "-v says when it expires" grep -Eq "expires 20.*\(in [0-9.]+s\)" "$E2E_TMP/skip.err"
  check "status shows it held after the job ended" is_held "$k"
  status_json=$(dblock status "$k" --json)
  check "status: expires about 10 s after the start" python3 -c "
import json, sys, datetime as dt
s = json.loads(sys.argv[1])['locks'][0]
p = lambda t: dt.datetime.strptime(t, '%Y-%m-%dT%H:%M:%S.%fZ')
held = (p(s['expires_at']) - p(s['last_started_at'])).total_seconds()
assert s['state'] == 'held' and 9.5 <= held <= 10.5, (s, held)
assert 0 < s['expires_in_ms'] <= 8000, s
assert s['last_exit_code'] == 0, s
" "$status_json"
fi

# (host-a keeps holding meanwhile: the checks below use their own keys.)
# --min-hold shorter than the wait: the second host gets the lock once it has passed.
# 6 s, so that a run under load (2.7 s seen for this 0.2 s job) is still told apart from one
# that waited --min-hold out.
k=$(key released)
start=$(now_ms)
assert_status "a 0.2 s job with --min-hold 6s" 0 dblock run "$k" --min-hold 6s -- sleep 0.2
# The row keeps --min-hold for every strategy, session ones too (their server lock is let go).
assert_between "dblock itself does not wait out --min-hold" 0 5000 $(($(now_ms) - start))
check "the lock is still held right after" is_held "$k"
check "free once --min-hold has passed" wait_for 12 is_free "$k"
assert_between "freed about 6 s after the start" 5500 12000 $(($(now_ms) - start))
assert_status "another host runs after --min-hold" 0 dblock run "$k" --owner host-b -- true

# A job longer than --min-hold releases when it ends, as without it.
k=$(key longjob)
assert_status "a 1 s job with --min-hold 0.3s" 0 dblock run "$k" --min-hold 0.3s -- sleep 1
check "released at once" is_free "$k"

wait_exit rc $a
assert_eq "host-a's run exits 0" 0 "$rc"
finish

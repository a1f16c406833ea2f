#!/usr/bin/env bash
# Run history: one row in <prefix>runs per run, whatever the outcome; bounded per key; shown by
# `history`, with the locks table's last start / last exit shown by `status`.
source "$(dirname "$0")/lib.sh"

# last_run KEY: "outcome exit_code owner token" of the newest run of KEY.
last_run() { history_field "$1" runs.0.outcome runs.0.exit_code runs.0.owner runs.0.token; }
outcome_of() { history_field "$1" runs.0.outcome runs.0.exit_code; }

k=$(key ok)
assert_status "ok run" 0 dblock run "$k" --owner hist-owner -- true
assert_eq "ok: outcome and exit code" "ok 0" "$(outcome_of "$k")"
token=$(status_field "$k" token)
assert_eq "ok: owner and token recorded" "ok 0 hist-owner $token" "$(last_run "$k")"

k=$(key failed)
assert_status "failed run" 3 dblock run "$k" -- sh -c 'exit 3'
assert_eq "failed: outcome and exit code" "failed 3" "$(outcome_of "$k")"

k=$(key maxhold)
assert_status "max-hold run" 124 dblock run "$k" --max-hold 0.3 --kill-after 1 -- sleep 30
assert_eq "max-hold: outcome and the command's status" "max-hold 143" "$(outcome_of "$k")"

k=$(key signal)
assert_status "command killed by a signal nobody sent through dblock" 137 dblock run "$k" -- sh -c 'kill -KILL $$'
assert_eq "signal: outcome and exit code" "signal 137" "$(outcome_of "$k")"

k=$(key killed)
start_bg runner dblock run "$k" -- sh -c "echo \$\$ >\"$E2E_TMP/killed\"; exec sleep 30" 2>"$E2E_TMP/runner.err"
# A dblock that ended before its command started is a failure of its own, said with its status
# and its words, not a SIGTERM test that then reads the wrong status.
started_or_gone() { test -s "$E2E_TMP/killed" || ! kill -0 "$runner" 2>/dev/null; }
wait_for 30 started_or_gone
if test -s "$E2E_TMP/killed"; then
  kill -TERM $runner
  wait_exit rc $runner
  assert_eq "SIGTERM to dblock: 143" 143 "$rc"
elif kill -0 "$runner" 2>/dev/null; then
  fail "the command never started: dblock run still running after 30 s: $(cat "$E2E_TMP/runner.err")"
else
  wait_exit rc "$runner"
  fail "the command never started: dblock run exited $rc: $(cat "$E2E_TMP/runner.err")"
fi
assert_eq "killed: outcome and exit code" "killed 143" "$(outcome_of "$k")"

# A waiter's run starts when it is granted the lock, not when its attempt began to wait (the
# server's clock is this host's): not before the holder's command ended.
k=$(key waited)
start_bg holder dblock run "$k" -- sh -c "sleep 1.5; date +%s%3N >\"$E2E_TMP/holder_end\""
wait_for 10 is_held "$k" || fail "the holder never held $k"
sleep 0.3
assert_status "the waiter's run" 0 dblock run -w 20 "$k" -- true
wait_exit rc "$holder"
waiter_start=$(date -d "$(history_field "$k" runs.0.started_at)" +%s%3N)
assert_between "the waiter's run started once the holder's command ended (ms after it)" -2 60000 \
  "$((waiter_start - $(cat "$E2E_TMP/holder_end")))"

if ! is_session_strategy; then
  k=$(key lost)
  lose_a_run "$k"
  assert_eq "a stolen lease: 76" 76 "$rc"
  assert_eq "lost: outcome and the command's status" "lost 143" "$(outcome_of "$k")"
fi

k=$(key nohistory)
assert_status "--no-history run" 0 dblock run "$k" --no-history -- true
assert_eq "--no-history records nothing" 0 "$(history_field "$k" runs.#)"
read -r started code <<<"$(status_field "$k" last_started_at last_exit_code)"
check "--no-history still counts as a start ($started)" test "$started" != null -a "$started" != none
assert_eq "--no-history still records the exit code" 0 "$code"

# Pruning keeps the newest N per key; other keys are untouched.
k=$(key prune)
for i in 1 2 3 4 5; do dblock --history-keep 3 run "$k" -- sh -c "exit $i"; done
assert_eq "--history-keep 3 keeps the newest three, newest first" "5 4 3" "$(history_field "$k" 'runs.*.exit_code')"
assert_eq "pruning one key leaves the others" "ok 0" "$(outcome_of "$(key ok)")"
assert_eq "--limit 2" 2 "$(dblock history "$k" --limit 2 --json | json_field runs.#)"

# history --json: every documented field, of the right type, for every key of this script.
check "history --json holds the documented fields" python3 -c "
import json, subprocess, sys, datetime as dt
doc = json.loads(subprocess.check_output(['dblock', 'history', '--json', '--limit', '1000']))
mine = [r for r in doc['runs'] if r['key'].startswith(sys.argv[1])]
assert len(mine) >= 8, len(mine)
p = lambda t: dt.datetime.strptime(t, '%Y-%m-%dT%H:%M:%S.%fZ')
for r in mine:
    for f in ('id', 'key', 'token', 'owner', 'host', 'pid', 'strategy', 'started_at', 'finished_at',
              'duration_ms', 'outcome', 'exit_code'):
        assert f in r, (f, r)
    assert r['outcome'] in ('ok', 'failed', 'lost', 'killed', 'max-hold', 'signal'), r
    assert r['strategy'] == sys.argv[2], r
    assert isinstance(r['token'], int) and r['token'] > 0, r
    assert isinstance(r['pid'], int) and r['pid'] > 0 and r['host'], r
    assert p(r['finished_at']) >= p(r['started_at']) and r['duration_ms'] >= 0, r
" "e2e-$$-" "$DBLOCK_STRATEGY"
check "history (people) has a header and the failed run" bash -c \
  "dblock history '$(key failed)' | grep -q '^STARTED' && dblock history '$(key failed)' | grep -q ' failed '"

# status --json: the documented fields, with the last run's start, finish and exit code.
k=$(key failed)
check "status --json holds the documented fields" has_status_fields "$k"
read -r skey state code started finished <<<"$(status_field "$k" key state last_exit_code last_started_at last_finished_at)"
assert_eq "status --json: key, state, last exit" "$k free 3" "$skey $state $code"
check "status --json: last finish ($finished) not before last start ($started)" \
  test "$started" != null -a "$finished" != null -a ! "$finished" \< "$started"
check "status (people) shows the last exit" bash -c "dblock status '$k' | tail -1 | grep -Eq ' 3\$'"

finish

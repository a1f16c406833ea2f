#!/usr/bin/env bash
# run -w on a terminal: one line when the wait starts (who holds the lock, since when, the
# strategy and when it expires) and one when it gives up; run without -w: one line when it
# skips (who holds it, or that --min-interval has not passed), whatever -E; nothing of it
# without a terminal (cron mails nothing) or with -q. -v "retrying" lines come at most about
# once a second. The terminal is a pty from util-linux script(1).
source "$(dirname "$0")/lib.sh"

command -v script >/dev/null 2>&1 || skip_or_fail "script is not installed (Debian package util-linux)"

k=$(key feedback)
start_bg holder dblock run "$k" --owner web1:4711 -- sleep 60
check "web1:4711 holds the lock" wait_for 15 is_held "$k"

# on_tty COMMAND: runs the command on a pty; its output (stdout and stderr) goes to stdout,
# its exit status is script's (-e).
on_tty() { script -qefc "$1" /dev/null; }

out=$(on_tty "dblock run '$k' -w 1.5 -- true" | tr -d '\r')
check "on a terminal: the wait start names holder, since, strategy and expiry" \
  grep -Eq "^dblock: waiting for '$k', held by web1:4711 since [0-9]{2}:[0-9]{2}:[0-9]{2} \(lease, expires in [0-9]+s\)$" <<<"$out"
check "on a terminal: a line when it gives up" \
  grep -Eq "^dblock: gave up waiting for '$k' after 1\.[0-9]+s: still held by web1:4711$" <<<"$out"
assert_eq "on a terminal: exactly those two lines" 2 "$(grep -c . <<<"$out")"
assert_status "on a terminal: giving up is still 75" 75 on_tty "dblock run '$k' -w 0.2 -- true" >/dev/null

out=$(on_tty "dblock -q run '$k' -w 1 -- true" | tr -d '\r')
assert_eq "on a terminal with -q: nothing" "" "$out"

err=$(dblock run "$k" -w 1 -- true 2>&1)
assert_eq "without a terminal: nothing" "" "$err"

skip_line="^dblock: skipped '$k': held by web1:4711 since [0-9]{2}:[0-9]{2}:[0-9]{2} \(lease, expires in [0-9]+s\)$"
out=$(on_tty "dblock run '$k' -- true" | tr -d '\r')
check "on a terminal, a skip: one line naming the holder" grep -Eq "$skip_line" <<<"$out"
assert_eq "on a terminal, a skip: only that line" 1 "$(grep -c . <<<"$out")"
assert_status "on a terminal, a skip is still 75" 75 on_tty "dblock run '$k' -- true" >/dev/null
out=$(on_tty "dblock run -E 0 '$k' -- true" | tr -d '\r')
check "on a terminal, a skip with -E 0: the line too" grep -Eq "$skip_line" <<<"$out"
assert_status "on a terminal, a skip with -E 0 is 0" 0 on_tty "dblock run -E 0 '$k' -- true" >/dev/null
out=$(on_tty "dblock -q run '$k' -- true" | tr -d '\r')
assert_eq "on a terminal with -q, a skip: nothing" "" "$out"
err=$(dblock run "$k" -- true 2>&1)
assert_eq "without a terminal, a skip: nothing" "" "$err"
err=$(dblock run -E 0 "$k" -- true 2>&1)
assert_eq "without a terminal, a skip with -E 0: nothing" "" "$err"
k3=$(key feedback-interval)
assert_status "a run of a --min-interval key" 0 dblock run "$k3" -- true
out=$(on_tty "dblock run '$k3' --min-interval 1h -- true" | tr -d '\r')
check "on a terminal, a --min-interval skip: one line saying so" \
  grep -Eq "^dblock: skipped '$k3': it ran less than --min-interval ago \(last started [^)]*\); due in " <<<"$out"
assert_eq "on a terminal, a --min-interval skip: only that line" 1 "$(grep -c . <<<"$out")"

# Acquired after waiting: the start line, and no give-up line.
k2=$(key feedback-free)
start_bg holder2 dblock run "$k2" -- sleep 1.5
check "the second key is held" wait_for 15 is_held "$k2"
out=$(on_tty "dblock run '$k2' -w 20 -- true" | tr -d '\r')
check "acquired after waiting: the start line" grep -q "^dblock: waiting for '$k2', held by " <<<"$out"
check "acquired after waiting: no give-up line" bash -c "! grep -q 'gave up' <<<'$out'"

# -v retry lines, rate-limited: a 6 s wait gives at most 6 + 2 of them (without the limit the
# backoff alone gives a dozen).
err=$(dblock -v run "$k" -w 6 -- true 2>&1)
retries=$(grep -c "; retrying in " <<<"$err")
assert_between "-v: retry lines over a 6 s wait ($retries)" 3 8 "$retries"

finish

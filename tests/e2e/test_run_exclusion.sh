#!/usr/bin/env bash
# run: exactly one of many simultaneous runs gets the lock; conflicts exit 75 or -E; -w waits.
source "$(dirname "$0")/lib.sh"

# Eight processes released by one barrier file: exactly one runs the command. The command holds
# until the seven others have exited (at most 60 s), so a racer the machine starts late still
# meets it held: a fixed 2 s let one that started after it ran at a load of ~190.
k=$(key race)
dblock init >/dev/null 2>&1 || true
hold="i=0; while [ \$(ls '$E2E_TMP'/status.* 2>/dev/null | wc -l) -lt 7 ] && [ \$i -lt 600 ]; do sleep 0.1; i=\$((i + 1)); done"
race 8 "$E2E_TMP/status" dblock run "$k" -- sh -c "echo \$DBLOCK_TOKEN >>'$E2E_TMP/ran'; $hold"
wait
assert_eq "8 racers: exactly one ran the command" 1 "$(wc -l <"$E2E_TMP/ran" | tr -d ' ')"
assert_eq "8 racers: one exit 0" 1 "$(cat "$E2E_TMP"/status.* | grep -cx 0)"
assert_eq "8 racers: seven exit 75" 7 "$(cat "$E2E_TMP"/status.* | grep -cx 75)"

# A holder in the background; -n (the default) and -E while it holds.
k=$(key conflict)
start_bg holder dblock run "$k" -- sleep 30
check "holder takes the lock" wait_for 10 is_held "$k"
assert_status "-n conflict" 75 dblock run "$k" -n -- touch "$E2E_TMP/conflict-ran"
assert_status "default is nonblocking" 75 dblock run "$k" -- touch "$E2E_TMP/conflict-ran"
assert_status "-E 123" 123 dblock run "$k" -E 123 -- touch "$E2E_TMP/conflict-ran"
assert_status "-E 0 skips silently" 0 dblock run "$k" -E 0 -- touch "$E2E_TMP/conflict-ran"
assert_status "-w 0 is -n" 75 dblock run "$k" -w 0 -- touch "$E2E_TMP/conflict-ran"
check "no conflicting command ran" test ! -e "$E2E_TMP/conflict-ran"
out=$(dblock run "$k" -- true 2>&1)
assert_eq "a skip prints nothing" "" "$out"
err=$(dblock -v run "$k" -- true 2>&1)
check "-v names the holder" grep -q "held by" <<<"$err"
start=$(now_ms)
assert_status "-w 1 times out with 75" 75 dblock run "$k" -w 1 -- true
elapsed=$(($(now_ms) - start))
assert_between "-w 1 waited about 1s" 800 5000 "$elapsed"
kill -TERM $holder
wait $holder

# -w 10 gets the lock soon after a holder of ~1.5 s ends.
k=$(key wait)
start_bg holder dblock run "$k" -- sleep 1.5
check "second holder takes the lock" wait_for 10 is_held "$k"
start=$(now_ms)
assert_status "-w 10 gets the lock after the holder ends" 0 dblock run "$k" -w 10 -- touch "$E2E_TMP/waited"
elapsed=$(($(now_ms) - start))
assert_between "-w acquired within a generous window" 300 8000 "$elapsed"
wait_exit rc $holder
assert_eq "holder exited 0" 0 "$rc"
check "the waiter ran its command" test -e "$E2E_TMP/waited"

# Everything after -- belongs to the command, even after -w D and even an option named -c.
assert_status "-w D then -- cmd -c ..." 0 dblock run "$k" -w 1 -- sh -c 'exit 0'

# Global options after the subcommand work too.
k=$(key global-after)
assert_status "global options after the subcommand" 0 dblock run "$k" --strategy "$DBLOCK_STRATEGY" -- true

finish

#!/usr/bin/env bash
# cells: .*:lease
# --table-format shedlock with one --owner on two hosts (a config file copied to both): ShedLock
# knows a holder only by locked_by, which the two share, so a holder whose lease passed while it
# was stopped must not extend or unlock the lease the other took since. dblock's token row
# tells them apart: the stale holder ends (76), the new one keeps its lock to the end and a
# third run meanwhile is a conflict (75). Before, the stale holder's release unlocked it.
source "$(dirname "$0")/lib.sh"

# dblock itself, not a function: start_bg's pid must be dblock's, for SIGSTOP to stop it.
shed=(--table-format shedlock --table "${DBLOCK_TABLE_PREFIX}shedlock")
k=$(key owner)

start_bg stale dblock "${shed[@]}" run --ttl 3s --kill-after 0s --owner batch "$k" -- sh -c "echo stale >>'$E2E_TMP/ran'; sleep 20"
wait_for 10 test -s "$E2E_TMP/ran" || fail "the first holder never started"
kill -STOP "$stale"
wait_for 10 eval "dblock \"\${shed[@]}\" status -q '$k' >/dev/null 2>&1; [ \$? -eq 1 ]" || fail "the stopped holder's lease never passed"
start_bg fresh dblock "${shed[@]}" run --ttl 6s --owner batch "$k" -- sh -c "echo fresh >>'$E2E_TMP/ran'; sleep 4; echo done >>'$E2E_TMP/ran'"
wait_for 10 eval "grep -q fresh '$E2E_TMP/ran'" || fail "the second holder never started"
kill -CONT "$stale"
wait_exit rc "$stale"
assert_eq "the holder whose lease passed ends as lost" 76 "$rc"
assert_status "a third run while the second holds is a conflict" 75 \
  dblock "${shed[@]}" run --owner other "$k" -- sh -c "echo third >>'$E2E_TMP/ran'"
wait_exit rc "$fresh"
assert_eq "the second holder kept its lock to the end" 0 "$rc"
assert_eq "who ran" "stale fresh done" "$(tr '\n' ' ' <"$E2E_TMP/ran" | sed 's/ $//')"

finish

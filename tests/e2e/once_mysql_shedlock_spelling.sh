#!/usr/bin/env bash
# --table-format shedlock on MariaDB/MySQL: ShedLock's DDL makes name a VARCHAR in the table's
# collation, where 'K', 'k' and 'K ' are one row (one lock, as for Java ShedLock), while
# dblock's own row of a name, which carries the fencing token, is byte-wise: a run of 'k' after
# runs of 'K' got token 1 again. Another spelling of a name the table has is refused (78),
# free or held; the table's own spelling goes on counting.
source "$(dirname "$0")/lib.sh"

shed=(--table-format shedlock --table "${DBLOCK_TABLE_PREFIX}shedlock")
k="Spell-$$"
lower=$(tr 'A-Z' 'a-z' <<<"$k")
dblock "${shed[@]}" run "$k" -- true
dblock "${shed[@]}" run "$k" -- true
expect_line "another case of a free name" 78 \
  "dblock: ShedLock's table has this name as '$k', which its collation takes for '$lower', while dblock's tokens tell the two apart; use '$k' on every host" \
  dblock "${shed[@]}" run "$lower" -- sh -c "echo ran >>'$E2E_TMP/ran'"
assert_status "a trailing space" 78 dblock "${shed[@]}" run "$k " -- sh -c "echo ran >>'$E2E_TMP/ran'"
start_bg holder dblock "${shed[@]}" run "$k" -- sleep 2
wait_for 5 eval "dblock \"\${shed[@]}\" status -q '$k' >/dev/null 2>&1" || fail "the holder never held"
assert_status "another case of a held name" 78 dblock "${shed[@]}" run "$lower" -- true
wait_exit rc "$holder"
assert_eq "the holder ran" 0 "$rc"
assert_eq "no other spelling ran" "" "$(cat "$E2E_TMP/ran" 2>/dev/null)"
assert_eq "the table's spelling counts on" 4 "$(dblock "${shed[@]}" run "$k" -- sh -c 'echo $DBLOCK_TOKEN')"

finish

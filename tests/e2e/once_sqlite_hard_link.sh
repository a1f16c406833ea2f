#!/usr/bin/env bash
# One SQLite database file with two names (a hard link) is refused (78) under either name:
# SQLite names its -wal and -shm, where the WAL's locks live, after the name it opened, so a
# run under each name held the same key at once (man dblock, DSN). A symbolic link, or another
# spelling of one path, is resolved to the same -shm: still one holder.
source "$(dirname "$0")/lib.sh"

dir="$E2E_TMP/db"
mkdir -p "$dir/real"
ln -s real "$dir/link"
first="sqlite:$dir/real/a.db"
dblock -d "$first" init >/dev/null 2>&1
k="linked-$$"

# Another spelling of the same name (a symlinked directory, "..", "//"): one lock.
start_bg holder dblock -d "$first" run "$k" -- sleep 3
wait_for 5 eval "dblock -d '$first' status -q '$k' >/dev/null 2>&1"
for spelling in "$dir/link/a.db" "$dir/real/../real/a.db" "$dir//real/a.db"; do
  assert_status "run on $spelling while the key is held elsewhere is a conflict" 75 \
    dblock -d "sqlite:$spelling" run "$k" -- true
done
wait_exit rc "$holder"
assert_eq "the holder ran to the end" 0 "$rc"

# A second name for the file: neither name locks any more.
ln "$dir/real/a.db" "$dir/real/b.db"
start_bg holder dblock -d "$first" run "$k" -- sh -c "echo a >>'$E2E_TMP/ran'; sleep 2"
sleep 0.5
expect_line "run under the second name" 78 \
  "dblock: '$k': refusing the SQLite database $dir/real/b.db: the file has 2 names (hard links), and dblock under another name would neither see this name's locks nor read its log (two holders, a corrupt file); remove the other names (find / -xdev -samefile $dir/real/b.db) and use one name everywhere" \
  dblock -d "sqlite:$dir/real/b.db" run "$k" -- sh -c "echo b >>'$E2E_TMP/ran'"
wait_exit rc "$holder"
assert_eq "run under the first name is refused too" 78 "$rc"
assert_eq "no command ran" "" "$(cat "$E2E_TMP/ran" 2>/dev/null)"
assert_status "acquire under a linked name is refused" 78 dblock -d "sqlite:$dir/real/b.db" acquire "$k"

rm "$dir/real/b.db"
assert_status "with one name again, run works" 0 dblock -d "$first" run "$k" -- true

finish

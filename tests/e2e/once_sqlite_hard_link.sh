#!/usr/bin/env bash
# One SQLite database file with two names (a hard link) is refused (78) under either name, and
# so is the file mounted on its own (`mount --bind FILE`, docker run -v FILE:FILE; where this
# user may mount): SQLite names its -wal and -shm, where the WAL's locks live, after the name it
# opened, so a run under each name held the same key at once (man dblock, DSN). A symbolic
# link, or another spelling of one path, is resolved to the same -shm: still one holder.
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

# The file alone, mounted at another name: that name is refused, the file's own still locks.
mkdir -p "$dir/mnt"
touch "$dir/mnt/c.db"
if mount --bind "$dir/real/a.db" "$dir/mnt/c.db" 2>/dev/null; then
  trap 'umount "$dir/mnt/c.db" 2>/dev/null; e2e_cleanup' EXIT
  start_bg holder dblock -d "$first" run "$k" -- sh -c "echo a >>'$E2E_TMP/mounted'; sleep 2"
  sleep 0.5
  expect_line "run on the file mounted at another name" 78 \
    "dblock: '$k': refusing the SQLite database $dir/mnt/c.db: the file is mounted on its own (a bind mount of the file, not of its directory), and dblock under another name would neither see this name's locks nor read its log (two holders, a corrupt file); mount the directory that holds it instead" \
    dblock -d "sqlite:$dir/mnt/c.db" run "$k" -- sh -c "echo c >>'$E2E_TMP/mounted'"
  wait_exit rc "$holder"
  assert_eq "the file's own name still locks" 0 "$rc"
  assert_eq "only the holder ran" a "$(cat "$E2E_TMP/mounted")"
  umount "$dir/mnt/c.db"
else
  echo "note  no bind mount for this user: the mounted-file case is not checked"
fi

finish

#!/usr/bin/env bash
# metrics --output FILE, for node_exporter's textfile collector: the text goes to a temporary
# file in FILE's directory that is renamed over FILE, so a reader sees the old file or the new
# one, never a part; the file is readable as a new file is (umask). When dblock fails (no
# database: 69) or cannot write FILE's directory (78, naming it), FILE keeps its old text and
# no temporary file is left behind.
source "$(dirname "$0")/lib.sh"

k=$(key metrics-out)
assert_status "a run to report" 0 dblock run "$k" -- true
dir=$E2E_TMP/textfile
mkdir "$dir"
prom=$dir/dblock.prom

expected=$(dblock metrics "$k")
out=$(umask 022 && dblock metrics "$k" --output "$prom")
assert_eq "--output: exit status" 0 $?
assert_eq "--output: nothing on stdout" "" "$out"
assert_eq "--output: the file holds what stdout would" "$expected" "$(cat "$prom")"
assert_eq "--output: readable by the collector (umask 022)" 644 "$(stat -c %a "$prom")"
assert_eq "--output: nothing else in the directory" "dblock.prom" "$(ls -A "$dir" | xargs)"

# The new text arrives by rename: another inode, never the old one rewritten in place.
inode=$(stat -c %i "$prom")
assert_status "--output again" 0 dblock metrics "$k" --output "$prom"
check "--output replaces the file by rename (a new inode)" test "$(stat -c %i "$prom")" != "$inode"

# dblock fails: the old file stays, nothing is left behind.
echo "old text" >"$prom"
mkdir "$E2E_TMP/empty"
err=$(dblock --dsn "sqlite:$E2E_TMP/empty/none.db" metrics --output "$prom" 2>&1)
assert_eq "no database: exit status" 69 $?
check "no database: says so" grep -q "no lock database at" <<<"$err"
assert_eq "no database: the old file is untouched" "old text" "$(cat "$prom")"
assert_eq "no database: nothing left in the directory" "dblock.prom" "$(ls -A "$dir" | xargs)"

# FILE's directory is missing or not writable: 78 naming the file; nothing left anywhere.
err=$(dblock metrics --output "$E2E_TMP/nodir/dblock.prom" 2>&1)
assert_eq "a missing directory: exit status" 78 $?
check "a missing directory: names the file" grep -qF "$E2E_TMP/nodir/dblock.prom" <<<"$err"
if [ "$(id -u)" != 0 ]; then
  chmod 555 "$dir"
  err=$(dblock metrics --output "$prom" 2>&1)
  assert_eq "a read-only directory: exit status" 78 $?
  check "a read-only directory: names the file" grep -qF "$prom" <<<"$err"
  chmod 755 "$dir"
  assert_eq "a read-only directory: the old file is untouched" "old text" "$(cat "$prom")"
fi

finish

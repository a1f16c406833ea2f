#!/usr/bin/env bash
# The SQLite write-ahead log stays bounded whatever the mix of subcommands (man/dblock.1,
# SQLite durability: a checkpoint past 128 pages, "at most about 500 KB" of log to read).
# Each acquire, renew and release is a process that commits once; a log that is checkpointed
# but never restarted grew by every one of them (1.2 MB after 100 cycles). The bound checked
# is 128 pages of 4 KB with their frame headers, plus the commit that crossed the mark: 600 KB.
source "$(dirname "$0")/lib.sh"

db="$E2E_TMP/wal.db"
export DBLOCK_DSN="sqlite:$db"
bound=$((600 * 1024))
dblock init >/dev/null 2>&1 || fail "init"

# cycles TAG N: N acquire/renew/release cycles of key TAG, printing the log's size after each.
cycles() {
  local k i
  k=$(key "$1")
  for ((i = 0; i < $2; i++)); do
    dblock acquire "$k" --ttl 30s --owner "o-$1" >/dev/null || echo "acquire failed" >&2
    dblock renew "$k" --owner "o-$1" >/dev/null || echo "renew failed" >&2
    dblock release "$k" --owner "o-$1" || echo "release failed" >&2
    stat -c %s "$db-wal"
  done
}

largest() { sort -n "$@" | tail -1; }

cycles serial 120 >"$E2E_TMP/serial" 2>"$E2E_TMP/serial.err"
check "120 serial acquire/renew/release cycles all succeed" test ! -s "$E2E_TMP/serial.err"
max=$(largest "$E2E_TMP/serial")
echo "    largest -wal over 120 serial cycles: $max bytes"
check "the -wal stays under $bound bytes over 120 serial cycles ($max)" test "$max" -le "$bound"

# Acquires alone, each of a new key (the history and the locks table grow too).
for ((i = 0; i < 100; i++)); do
  dblock acquire "$(key "many-$i")" --ttl 30s >/dev/null || fail "acquire many-$i"
  stat -c %s "$db-wal"
done >"$E2E_TMP/acquires"
max=$(largest "$E2E_TMP/acquires")
echo "    largest -wal over 100 acquires of new keys: $max bytes"
check "the -wal stays under $bound bytes over 100 acquires ($max)" test "$max" -le "$bound"

# Three scripts at once: a checkpoint that meets another process's reader or writer is left to
# the next commit past the mark.
cycles a 40 >"$E2E_TMP/a" 2>>"$E2E_TMP/par.err" &
cycles b 40 >"$E2E_TMP/b" 2>>"$E2E_TMP/par.err" &
cycles c 40 >"$E2E_TMP/c" 2>>"$E2E_TMP/par.err" &
wait
check "concurrent cycles all succeed" test ! -s "$E2E_TMP/par.err"
max=$(largest "$E2E_TMP/a" "$E2E_TMP/b" "$E2E_TMP/c")
echo "    largest -wal over 3 x 40 concurrent cycles: $max bytes"
check "the -wal stays under $bound bytes with three scripts at once ($max)" test "$max" -le "$bound"

finish

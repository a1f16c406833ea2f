#!/usr/bin/env bash
# run: keys with quotes, semicolons, %, spaces and non-ASCII are ordinary keys.
source "$(dirname "$0")/lib.sh"

keys=(
  "it's \"quoted\""
  "a; DROP TABLE dblock_locks; --"
  "100% _done_"
  "  spaces  around  "
  "naïve-日本語-ключ"
  'back\slash'
)
i=0
for k in "${keys[@]}"; do
  k="$$-$k"
  i=$((i + 1))
  dblock run "$k" -- sh -c 'printf %s "$DBLOCK_KEY"' >"$E2E_TMP/key.$i"
  assert_eq "key $i: run exits 0" 0 $?
  assert_eq "key $i: DBLOCK_KEY round-trips" "$k" "$(cat "$E2E_TMP/key.$i")"
  start_bg holder dblock run "$k" -- sleep 30
  check "key $i: held while running" wait_for 10 is_held "$k"
  assert_status "key $i: conflicts with itself" 75 dblock run "$k" -- true
  kill -TERM $holder
  wait $holder
  check "key $i: free afterwards" wait_for 5 is_free "$k"
done

# Keys that differ only in a wildcard character or case are different locks.
start_bg holder dblock run "$$-a%c" -- sleep 30
check "a%c held" wait_for 10 is_held "$$-a%c"
assert_status "abc is another key" 0 dblock run "$$-abc" -- true
assert_status "a_c is another key" 0 dblock run "$$-a_c" -- true
assert_status "A%C is another key" 0 dblock run "$$-A%C" -- true
kill -TERM $holder
wait $holder

assert_status "a key with a control character is a usage error" 64 dblock run "$(printf 'bad\tkey')" -- true
assert_status "an empty key is a usage error" 64 dblock run "" -- true

finish

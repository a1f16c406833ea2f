#!/usr/bin/env bash
# release --force (dblock(1), release): the key is free when it returns, a --min-hold that a
# finished run left behind included (status shows that one held), on every backend and
# strategy; the release statement is written once (core/sql/release_statements.cpp).
source "$(dirname "$0")/lib.sh"

k=$(key forced-hold)
assert_status "a short job with --min-hold 60s" 0 dblock run "$k" --owner host-a --min-hold 60s -- true
check "its --min-hold holds the key" is_held "$k"
assert_status "release --force" 0 dblock release "$k" --force
check "free when release --force returns" is_free "$k"
assert_status "another host runs at once" 0 dblock run "$k" --owner host-b -w 0 -- true

# A key nobody holds: --force leaves it free and exits 0.
k=$(key forced-free)
assert_status "release --force of a key never taken" 0 dblock release "$k" --force
check "still free" is_free "$k"
finish

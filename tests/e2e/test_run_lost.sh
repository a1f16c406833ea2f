#!/usr/bin/env bash
# run: a lease taken from under a running command terminates it (76); --max-hold ends it (124).
source "$(dirname "$0")/lib.sh"

k=$(key maxhold)
start=$(now_ms)
assert_status "--max-hold expires with 124" 124 dblock run "$k" --max-hold 1 -- sleep 30
assert_between "--max-hold stopped it in time" 800 6000 $(($(now_ms) - start))
start=$(now_ms)
assert_status "--max-hold kills a command that ignores SIGTERM" 124 \
  dblock run "$k" --max-hold 0.5 --kill-after 1 -- sh -c "trap '' TERM; sleep 30"
assert_between "SIGKILL after --kill-after" 1300 8000 $(($(now_ms) - start))
check "the lock is free after --max-hold" is_free "$k"

# An explicit --kill-after the TTL cannot cover; without one the default shrinks to fit.
assert_status "--ttl too short for --kill-after is a usage error" 64 dblock run "$k" --ttl 3 --kill-after 5s -- true
err=$(dblock run "$k" --ttl 3 --kill-after 5s -- true 2>&1)
check "the message says which values work" grep -q -- "--ttl 18s" <<<"$err"

if is_session_strategy; then
  finish  # stealing a lease is a lease-only story
fi

k=$(key lost)
start_bg runner dblock run "$k" --ttl 6 --kill-after 1 -- sh -c "echo \$\$ >\"$E2E_TMP/cmd\"; exec sleep 60"
check "command started" wait_for 10 test -s "$E2E_TMP/cmd"
assert_status "release --force from another process" 0 dblock release "$k" --force
start=$(now_ms)
wait_exit rc $runner
assert_eq "a stolen lease ends the run with 76" 76 "$rc"
assert_between "noticed at the next heartbeat" 0 6000 $(($(now_ms) - start))
check "the command is gone" bash -c "! kill -0 $(cat "$E2E_TMP/cmd") 2>/dev/null"

# Taken over between two renewals: the command ends before the next heartbeat, so only the
# release at the end finds the lease gone. A lock lost during the run is still 76, and the
# history says lost. (The command gets no DSN from dblock; it is passed under another name.)
k=$(key taken)
assert_status "a lease taken over before the release exits 76" 76 env LOST_DSN="$DBLOCK_DSN" \
  dblock run "$k" --ttl 30s -- sh -c 'DBLOCK_DSN=$LOST_DSN dblock release "$DBLOCK_KEY" --force'
assert_eq "the history row of a run whose lease was taken over says lost" lost "$(history_field "$k" runs.0.outcome)"

# --on-lost ignore: the command finishes and its status stands.
dblock run "$k" --ttl 3 --kill-after 0 --on-lost ignore -- sh -c "echo \$\$ >\"$E2E_TMP/cmd2\"; sleep 2.5; exit 4" \
  2>"$E2E_TMP/ignore.err" &
runner=$!
remember_pid $runner
check "ignore: command started" wait_for 10 test -s "$E2E_TMP/cmd2"
dblock release "$k" --force >/dev/null
wait_exit rc $runner
assert_eq "--on-lost ignore keeps the command's status" 4 "$rc"
check "--on-lost ignore warned" grep -q "lost" "$E2E_TMP/ignore.err"

finish

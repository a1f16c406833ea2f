#!/usr/bin/env bash
# run: the command's exit status, 128+signal, 126/127, argv as given, environment, release.
source "$(dirname "$0")/lib.sh"

k=$(key status)
assert_status "exit 0" 0 dblock run "$k" -- true
assert_status "exit 7 passes through" 7 dblock run "$k" -- sh -c 'exit 7'
assert_status "-c runs through /bin/sh" 9 dblock run "$k" -c 'exit 9'
assert_status "death by SIGUSR1 is 128+10" 138 dblock run "$k" -- sh -c 'kill -USR1 $$'
assert_status "death by SIGKILL is 128+9" 137 dblock run "$k" -c 'kill -KILL $$'
check "the lock is free after each run" is_free "$k"

assert_status "command not found is 127" 127 dblock run "$k" -- dblock-no-such-command
err=$(dblock run "$k" -- dblock-no-such-command 2>&1)
check "not found says cannot execute" grep -q "^dblock: cannot execute dblock-no-such-command" <<<"$err"
printf '#!/bin/sh\nexit 0\n' >"$E2E_TMP/noexec"
chmod 644 "$E2E_TMP/noexec"
assert_status "not executable is 126" 126 dblock run "$k" -- "$E2E_TMP/noexec"
check "the lock is free after an exec failure" is_free "$k"

# argv reaches the command untouched: no shell in between.
dblock run "$k" -- printf '%s|' 'a b' '$HOME' '*' ';' >"$E2E_TMP/argv"
assert_eq "argv passed as given" 'a b|$HOME|*|;|' "$(cat "$E2E_TMP/argv")"

# Environment: DBLOCK_* for the command, never the DSN.
DBLOCK_DSN_FILE=/nonexistent-but-must-not-leak dblock --dsn "$DBLOCK_DSN" run "$k" --owner e2e-owner -- env >"$E2E_TMP/env" 2>/dev/null ||
  dblock run "$k" --owner e2e-owner -- env >"$E2E_TMP/env"
check "DBLOCK_KEY set" grep -qx "DBLOCK_KEY=$k" "$E2E_TMP/env"
check "DBLOCK_OWNER set" grep -qx "DBLOCK_OWNER=e2e-owner" "$E2E_TMP/env"
check "DBLOCK_RUN_STRATEGY set" grep -qx "DBLOCK_RUN_STRATEGY=$DBLOCK_STRATEGY" "$E2E_TMP/env"
check "DBLOCK_TOKEN is a positive number" grep -qE '^DBLOCK_TOKEN=[1-9][0-9]*$' "$E2E_TMP/env"
check "no DBLOCK_DSN in the command's environment" bash -c "! grep -q '^DBLOCK_DSN' '$E2E_TMP/env'"

# Tokens grow with every run.
t1=$(dblock run "$k" -- sh -c 'echo $DBLOCK_TOKEN')
t2=$(dblock run "$k" -- sh -c 'echo $DBLOCK_TOKEN')
check "tokens strictly increase ($t1 < $t2)" test "$t2" -gt "$t1"

# A command's output is its own; run adds nothing on success.
out=$(dblock run "$k" -- echo hello 2>&1)
assert_eq "run prints nothing of its own" hello "$out"

finish

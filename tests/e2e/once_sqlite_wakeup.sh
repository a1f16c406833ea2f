#!/usr/bin/env bash
# A SQLite waiter (`run -w`) is woken when the holder releases, not by its polling backoff: it
# sleeps on its key's word in <db>-wake, which a release increments and wakes one sleeper of
# (src/backends/sqlite/sqlite_file.hpp, WakeWords).
# Polling, a waiter that has waited 2 s sleeps 0.5 to 1 s between attempts, so it starts within
# 300 ms of the release only about 4 times in 10; woken, every time. Generous window, many tries.
# The watch must not wake the waiter for its own attempts: it keeps backing off while it waits.
source "$(dirname "$0")/lib.sh"

k="wake-$$"
dblock run "$k" -- true >/dev/null 2>&1  # the tables, the key's row and the -wal file exist
tries=6 quick=0 gaps="" announced=0 retries=""
for i in $(seq "$tries"); do
  timed_handoff "$k" -v 2>"$E2E_TMP/waiter.err"
  if [ -n "$handoff_gap" ]; then
    gaps="$gaps $handoff_gap"
    [ "$handoff_gap" -lt 300 ] && quick=$((quick + 1))
  fi
  grep -q "a release was announced" "$E2E_TMP/waiter.err" && announced=$((announced + 1))
  retries="$retries $(grep -c "retrying in" "$E2E_TMP/waiter.err")"
done
echo "      ms from the holder's command ending to the waiter's starting:$gaps"
echo "      the waiter's backoff retries while the holder held the key (about 2.5 s):$retries"
assert_between "waiters started within 300 ms of the release (of $tries)" $((tries - 1)) "$tries" "$quick"
assert_eq "every waiter was woken by the release" "$tries" "$announced"
for n in $retries; do
  assert_between "a waiter's own attempts do not wake it (retries in 2.5 s)" 1 15 "$n"
done

finish

#!/usr/bin/env bash
# `release --force` and status judge a session holder by the server's lock state for that key,
# never by the recorded session id alone (man/dblock.1, release). A key whose holder died is
# given another live holder's session id, as a forger or a reused id would: status must not
# show it held, and `release --force` must clear it without ending that other key's holder.
source "$(dirname "$0")/lib.sh"

s=$DBLOCK_STRATEGY
dead=$(key dead)
other=$(key other)
log=$E2E_TMP/log

# A holder of $dead that dies without releasing: its row stays unreleased.
dblock run "$dead" -- sleep 60 2>>"$E2E_TMP/dead.err" &
first=$!
remember_pid $first
check "$s: the first holder holds $dead" wait_for 10 is_held "$dead"
children=$(pgrep -P "$first" | tr '\n' ' ')
kill -KILL "$first" $children 2>/dev/null
check "$s: $dead reads free once its holder is gone" wait_for 10 is_free "$dead"

if ! start_job_holder "$other" "$log" 60 --ttl 30s; then
  fail "$s: the holder of $other never started"
  finish
fi
sid=$(server_sql "SELECT session_id FROM ${DBLOCK_TABLE_PREFIX}locks WHERE name = '$other'")
check "$s: forged $dead's session to $other's holder ($sid)" \
  server_sql "UPDATE ${DBLOCK_TABLE_PREFIX}locks SET session_id = '$sid', released_at = NULL WHERE name = '$dead'"

check "$s: status does not take $other's holder for $dead's" is_free "$dead"
assert_status "$s: release --force $dead" 0 dblock release "$dead" --force
sleep 0.5
check "$s: $other's holder was not ended" kill -0 "$holder"
check "$s: $other is still held" is_held "$other"
check "$s: $dead reads free" is_free "$dead"
assert_status "$s: $dead can be taken" 0 dblock run "$dead" -w 5 -- true
check "$s: $other's holder still runs" kill -0 "$holder"
kill -TERM "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
finish

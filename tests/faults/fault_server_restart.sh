#!/usr/bin/env bash
# A holder and a waiting competitor across a server restart.
# (a) A short outage while the holder runs. lease: `run --ttl 30s --kill-after 2s` renews every
#     10 s, and the holder's command is ended 27 s after the last renewal. The server goes down
#     about 1 s after the acquisition and stays down 11 s, so the renewal at 10 s fails, and a
#     retry (every 2 s) succeeds once it is back, well before 27 s: the holder renews across
#     the outage, its command (20 s) completes and it exits 0. (With --ttl 18s the renewal could
#     come just before the server went down, leave 6 s for the stop, the outage and the start,
#     and a loaded machine's slow stop made the holder give up.) Session strategies (a 3 s
#     outage): the lock died with the session, so the holder's command is ended within about a
#     second of the server going down and the holder exits 76. Either way the competitor (-w 60)
#     runs afterwards, never alongside.
# (b) lease only: an outage longer than the TTL. The holder cannot renew, ends its command
#     before the lease can expire and exits 76; the competitor runs once the server is back.
# Prints how long after the server went down the holder's command ended and the competitor's began.
source "$(dirname "$0")/lib.sh"
server_control_required

# scenario NAME TTL KILL_AFTER JOB_SECONDS OUTAGE_SECONDS: leaves the holder's and the
# competitor's exit statuses in $holder_status and $competitor_status, the log in $log.
scenario() {
  local name=$1 ttl=$2 kill_after=$3 job=$4 outage=$5 k holder competitor
  log=$E2E_TMP/$name.log
  : >"$log"
  k=$(key "$name")
  dblock -v run --ttl "$ttl" --kill-after "$kill_after" "$k" -- "$ORACLE_JOB" "$log" "$job" \
    >"$E2E_TMP/$name.holder" 2>&1 &
  holder=$!
  remember_pid "$holder"
  check "$name: the holder's command started" wait_for 10 grep -qs '^start' "$log"
  dblock -v run -w 60 "$k" -- "$ORACLE_JOB" "$log" 0.3 >"$E2E_TMP/$name.competitor" 2>&1 &
  competitor=$!
  remember_pid "$competitor"
  check "$name: the competitor is waiting" wait_for 10 grep -qs 'retrying in' "$E2E_TMP/$name.competitor"
  mark "$name.stopping"
  server_ctl stop-server
  mark "$name.down"
  sleep "$outage"
  server_ctl start-server
  mark "$name.up"
  holder_status=0
  wait "$holder" || holder_status=$?
  competitor_status=0
  wait "$competitor" || competitor_status=$?
  [ "$competitor_status" = 0 ] || sed 's/^/    competitor: /' "$E2E_TMP/$name.competitor"
  local first second end start down
  first=$(awk '$1 == "start" { print $2; exit }' "$log")
  second=$(awk -v f="$first" '$1 == "start" && $2 != f { print $2; exit }' "$log")
  end=$(oracle_time "$log" "$first" end)
  start=$([ -n "$second" ] && oracle_time "$log" "$second" start)
  down=$(figure "$name.down")
  holder_end_ms=$([ -n "$end" ] && echo $((end - down)))
  echo "$name: server stopping took $((down - $(figure "$name.stopping"))) ms, down for $(($(figure "$name.up") - down)) ms;" \
    "after it was down: holder's command ended at ${holder_end_ms:-never} ms, competitor's began at" \
    "$([ -n "$start" ] && echo "$((start - down)) ms" || echo never)"
}

if is_session_strategy; then
  scenario short 18s 5s 12 3
  assert_eq "short outage: the holder lost its session lock and exits 76" 76 "$holder_status"
  # Within about a second of the server going down (generously: 1.5 s after it was gone).
  check "short outage: the holder's command ended at once (${holder_end_ms:-never} ms after the server was down)" \
    test -n "$holder_end_ms" -a "${holder_end_ms:-99999}" -le 1500
  [ "$holder_status" = 76 ] || sed 's/^/    holder: /' "$E2E_TMP/short.holder"
else
  scenario short 30s 2s 20 11
  assert_eq "short outage: the lease holder rides it out and exits 0" 0 "$holder_status"
  check "short outage: the holder's command completed" grep -q '^end .* done$' "$log"
  check "short outage: a renewal failed in the outage and a later one succeeded" \
    grep -q 'renewed after [0-9]* failed tries' "$E2E_TMP/short.holder" ||
    sed 's/^/    holder: /' "$E2E_TMP/short.holder"
fi
assert_eq "short outage: the competitor runs after the restart" 0 "$competitor_status"
oracle_check "short outage: holder and competitor, one at a time" "$log" 2

if ! is_session_strategy; then
  scenario long 6s 1s 20 9
  assert_eq "outage longer than the TTL: the holder exits 76" 76 "$holder_status"
  [ "$holder_status" = 76 ] || sed 's/^/    holder: /' "$E2E_TMP/long.holder"
  check "outage longer than the TTL: the holder's command was terminated" grep -q '^end .* term$' "$log"
  assert_eq "outage longer than the TTL: the competitor runs after the restart" 0 "$competitor_status"
  oracle_check "outage longer than the TTL: holder and competitor, one at a time" "$log" 2
fi
finish

#!/usr/bin/env bash
# A holder cut off from the server must not keep its lock for hours. The holder reaches the
# server through tests/faults/proxy.py; the proxy freezes (no RST, nothing closed: the path just
# goes dark). A competitor connected directly and waiting must then get the lock within
# 2 x ttl + 10 s of the freeze, only after the holder's command ended, and the holder exits 76.
# Lease frees by expiry; the session strategies depend on the idle limit dblock gives its
# holder session (2 x ttl + 5 s), since the server sees an idle, healthy-looking connection.
source "$(dirname "$0")/lib.sh"

# The shortest TTL that leaves the command a grace (--kill-after 0.5s, so it is ended by SIGTERM
# and logs its end for the oracle) beside the 1 s margin of the renew interval (TTL/3): the
# idle limit is 14 s. The bounds are TTL-relative: a longer TTL only made the test wait longer.
ttl_s=4.5
bound_ms=$((2 * 4500 + 10000))  # 2 x ttl + 10 s
k=$(key frozen)
log=$E2E_TMP/log

target=$(dsn_port "$DBLOCK_DSN") || { fail "the server DSN is not on 127.0.0.1"; finish; }
proxy_start "$target"
proxied=$(proxy_dsn "$DBLOCK_DSN" "$PROXY_PORT")

# --kill-after 0.5s: with --ttl 4.5s the renew interval (1.5 s) must cover the grace and the 1 s margin.
DBLOCK_DSN=$proxied dblock run "$k" --ttl "${ttl_s}s" --kill-after 0.5s -- "$ORACLE_JOB" "$log" 60 \
  2>"$E2E_TMP/holder.err" &
holder=$!
remember_pid "$holder"
check "the holder's command starts through the proxy" wait_for 30 grep -qs '^start' "$log"
accepted=$(proxy_state | sed -E 's/.*accepted=([0-9]+).*/\1/')
check "the holder's connections go through the proxy ($accepted accepted)" test "${accepted:-0}" -ge 1
# Let a renewal or two pass through the proxy before the path goes dark.
sleep 2.5
check "the holder still runs before the freeze" pids_alive "$holder"

check "the proxy freezes" proxy_freeze
freeze_ms=$(proxy_since_ms)

dblock run "$k" -w 60 -- "$ORACLE_JOB" "$log" 0.5 2>"$E2E_TMP/competitor.err" &
competitor=$!
remember_pid "$competitor"

job_status holder_status 60 "$holder"
assert_eq "the cut-off holder exits 76 (lock lost)" 76 "$holder_status"
job_status competitor_status 90 "$competitor"
assert_eq "the direct competitor runs (exit 0)" 0 "$competitor_status"

oracle_check "no overlap between the cut-off holder and the competitor" "$log" 2
holder_end_ms=$(awk '$1 == "end" { print int($3 / 1000000); exit }' "$log")
competitor_start_ms=$(awk '$1 == "start" { n++; if (n == 2) { print int($3 / 1000000); exit } }' "$log")
if [ -n "$holder_end_ms" ] && [ -n "$competitor_start_ms" ]; then
  echo "measured ($DBLOCK_TEST_BACKEND:$DBLOCK_STRATEGY, ttl ${ttl_s}s):" \
    "freeze->holder command end $((holder_end_ms - freeze_ms)) ms," \
    "freeze->competitor start $((competitor_start_ms - freeze_ms)) ms," \
    "gap $((competitor_start_ms - holder_end_ms)) ms"
  assert_between "the competitor gets the lock within 2 x ttl + 10 s of the freeze" \
    0 "$bound_ms" $((competitor_start_ms - freeze_ms))
else
  fail "the log lacks the holder's end or the competitor's start (competitor waited up to 60 s)"
fi
if [ "$holder_status" != 76 ] || [ "$competitor_status" != 0 ]; then
  echo "--- holder stderr"; cat "$E2E_TMP/holder.err"
  echo "--- competitor stderr"; cat "$E2E_TMP/competitor.err"
  echo "--- oracle log"; cat "$log"
fi

kill "$PROXY_PID" 2>/dev/null
finish

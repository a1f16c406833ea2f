#!/usr/bin/env bash
# The proxy must do what the scenarios rely on: forward; when frozen, stall a new connection
# (dblock's connect timeout fires, exit 69) without refusing it; forward again after a thaw;
# and on reset abort live connections, which a session holder sees as a lost lock (76) while a
# lease holder reconnects and finishes (0).
source "$(dirname "$0")/lib.sh"

target=$(dsn_port "$DBLOCK_DSN") || { fail "the server DSN is not on 127.0.0.1"; finish; }
proxy_start "$target"
proxied=$(proxy_dsn "$DBLOCK_DSN" "$PROXY_PORT")
through() { DBLOCK_DSN=$proxied dblock "$@"; }

# status only inspects: the tables must exist (init makes them, through the proxy too).
assert_status "init through the running proxy" 0 through init
assert_status "status through the running proxy" 0 through status
check "proxy_freeze confirms" proxy_freeze
t0=$(now_ms)
assert_status "status through the frozen proxy times out connecting" 69 through --connect-timeout 2s status
assert_between "  ... after the connect timeout, not at once (ms)" 1500 20000 $(($(now_ms) - t0))
check "proxy_thaw confirms" proxy_thaw
assert_status "status through the thawed proxy" 0 through status

k=$(key reset)
through run "$k" --ttl 6s --kill-after 1s -- sh -c 'touch "$0"; sleep 8' "$E2E_TMP/started" 2>"$E2E_TMP/holder.err" &
holder=$!
remember_pid "$holder"
check "a holder starts through the proxy" wait_for 30 test -e "$E2E_TMP/started"
sleep 1
proxy_reset
job_status status 30 "$holder"
if is_session_strategy; then
  assert_eq "a session holder whose connection was reset lost its lock" 76 "$status"
else
  assert_eq "a lease holder whose connection was reset reconnects and finishes" 0 "$status"
fi
[ "$status" = 0 ] || [ "$status" = 76 ] || cat "$E2E_TMP/holder.err"
kill "$PROXY_PID" 2>/dev/null
finish

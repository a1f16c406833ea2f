#!/usr/bin/env bash
# cells: postgres:(lease|advisory)
# The handoff at a distance (README, Benchmarks; dblock(1) NOTES, Round trips): with the server
# a long round trip R away (scripts/bench/delay_proxy.py on 127.0.0.1), a `run -w` waiter's
# command starts within these many round trips of the holder's command ending. What each needs
# at the least: a lease waiter hears the release's NOTIFY (the release reaches the server, half
# a round trip; the NOTIFY reaches the waiter, half) and takes the row (one): 2 R; a waiter
# blocked in the server on the lock itself only hears that it got it: 1 R. The bound is that
# plus one round trip, for the processes' own time on a loaded machine: a step more on the
# path (a statement before the command starts, as a lease waiter's UNLISTEN and queue place
# were) fails it. R is long (200 ms) so that the machine's own milliseconds stay well within it.
# Not for-update and txn-insert yet: 4 to 8 round trips at this R (the holder's release row,
# its ROLLBACK, the waiter's numbering, and a waiter that waits in the server in slices, a
# round trip apart, which a long R makes count), too uneven for a bound.
source "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || skip_or_fail "no python3 for the delay proxy"
delay_ms=100
rtt_ms=$((2 * delay_ms))
case $DBLOCK_STRATEGY in
  lease) rtts=3 ;;               # NOTIFY, then the take
  advisory) rtts=2 ;;            # blocked in pg_advisory_lock
esac

target_port=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.urlsplit(sys.argv[1]).port or 5432)' "$DBLOCK_DSN")
python3 "$DBLOCK_SOURCE_DIR/scripts/bench/delay_proxy.py" --target-port "$target_port" --delay-ms "$delay_ms" \
  --port-file "$E2E_TMP/proxy.port" --lifetime 200 >/dev/null &
remember_pid $!
wait_for 10 test -s "$E2E_TMP/proxy.port" || { fail "the delay proxy did not start"; finish; }
# Through the proxy, without TLS (its handshake would only make the test longer).
DBLOCK_DSN=$(plain_dsn_via "$(cat "$E2E_TMP/proxy.port")")
export DBLOCK_DSN

k=$(key distance)
d=$E2E_TMP/handoff
mkdir -p "$d"
# The holder's command holds until the test lets it go, then writes when it ended.
start_bg holder dblock run "$k" -- sh -c "while [ ! -e '$d/go' ]; do sleep 0.005; done; date +%s%N >'$d/end'"
wait_for 30 is_held "$k" || fail "the holder did not take $k"
start_bg waiter dblock -v run -w 60s "$k" -- sh -c "date +%s%N >'$d/start'" 2>"$d/waiter.err"
# It waits once it said the key is held; then a few round trips more, for a lease waiter's
# place in the key's queue and its LISTEN.
wait_for 30 grep -q " is held" "$d/waiter.err" || fail "the waiter never said it waits: $(tail -n 1 "$d/waiter.err")"
sleep "$(awk -v r="$rtt_ms" 'BEGIN { printf "%.2f", 6 * r / 1000 }')"
touch "$d/go"
wait_exit hs "$holder" 60
wait_exit ws "$waiter" 60
assert_eq "the holder exits 0" 0 "$hs"
assert_eq "the waiter exits 0" 0 "$ws"
if [ -s "$d/end" ] && [ -s "$d/start" ]; then
  gap=$((($(cat "$d/start") - $(cat "$d/end")) / 1000000))
  echo "      handoff ${gap} ms at a ${rtt_ms} ms round trip (bound ${rtts} round trips)"
  assert_between "the waiter's command starts after the holder's ended, within $rtts round trips of ${rtt_ms} ms" \
    1 $((rtts * rtt_ms)) "$gap"
else
  fail "a command did not run"
fi
finish

#!/usr/bin/env bash
# A MySQL/MariaDB row-lock strategy's run (for-update, txn-insert) opens its two connections
# (the lock's session and the bookkeeping one) at once, side by side, so at a distance it waits
# for one handshake, not two in a row (dblock(1), NOTES, Round trips). The counting proxy (tests/e2e/mysql_count_proxy.py)
# holds back the server's greeting of a connection opened alone until another is opened, or
# 2 s: a run that opens the second only after the first's handshake is 2 s slower and counts
# no connection side by side. A lease or advisory run needs one connection, and waits the 2 s.
source "$(dirname "$0")/lib.sh"

mysql_count_proxy 120 --hold-lone-greeting 2 || { fail "the counting proxy did not start"; finish; }

count() {
  local v
  v=$(tr ' ' '\n' <"$E2E_TMP/counts" | sed -n "s/^$1=//p")
  echo "${v:-0}"
}

# The tables and the keys' rows first, not through the proxy.
for strategy in advisory for-update txn-insert; do
  assert_status "$strategy: a first run" 0 dblock -s "$strategy" run "$(key "$strategy")" -- true
done
for strategy in for-update txn-insert; do
  c0=$(count connections) s0=$(count side_by_side)
  t0=$(date +%s%N)
  assert_status "$strategy: the run" 0 dblock -d "$proxied" -s "$strategy" run "$(key "$strategy")" -- true
  ms=$((($(date +%s%N) - t0) / 1000000))
  echo "      $strategy: $ms ms, connections=$(($(count connections) - c0)) side_by_side=$(($(count side_by_side) - s0))"
  assert_eq "$strategy: two connections" 2 "$(($(count connections) - c0))"
  assert_eq "$strategy: opened side by side" 1 "$(($(count side_by_side) - s0))"
  assert_between "$strategy: no handshake waited for alone (under the proxy's 2 s)" 0 1900 "$ms"
done
# advisory holds its lock in the bookkeeping session itself: one connection, so in a start
# storm against max_connections a contender knocks once (src/backends/mysql/mysql_backend.cpp).
c0=$(count connections) s0=$(count side_by_side)
assert_status "advisory: the run" 0 dblock -d "$proxied" -s advisory run "$(key advisory)" -- true
assert_eq "advisory: one connection" 1 "$(($(count connections) - c0))"
assert_eq "advisory: none opened beside it" 0 "$(($(count side_by_side) - s0))"

finish

#!/usr/bin/env bash
# cells: mysql:(for-update|txn-insert)
# Rolling upgrade at a distance: upgrade_mixed.sh's chaos (tests/upgrade/lib.sh) with every
# dblock, of either version, 3 ms each way from the server (scripts/bench/delay_proxy.py on
# 127.0.0.1). There a row-lock run of this build sends its numbering with its lock statement
# (dblock(1) NOTES, Round trips): a first attempt's behind lock.grant_wait, a waiter's later
# attempts' behind the numbering gate (lock.gate_wait), each proven in the server by
# lock.row_numbered, against holders and waiters of the previous release, which number after
# the grant. On loopback nothing chains, so upgrade_mixed.sh never runs that path. What chains
# is decided at run time (the lock session's handshake, timed), so the test does not assume
# it: strace sees what each of this build's runs sends, and the chained first attempt's
# statement (below, by a fragment of its text) must be among it. Another cell's row locks
# (PostgreSQL's, once a first attempt chains there) need their statement's line below and the
# cell in the cells line above.
source "$(dirname "$0")/lib.sh"

b=$DBLOCK_TEST_BACKEND
case $b in
  mysql) chained=("lock.grant_wait:SET w = w - 1 + SLEEP(0.001)") ;;
  *) skip_or_fail "no chained numbering on $b" ;;
esac
command -v python3 >/dev/null || skip_or_fail "no python3 for the delay proxy"
command -v strace >/dev/null || skip_or_fail "strace is needed to see what the runs send (scripts/install-deps.sh)"
strace -f -o /dev/null true 2>/dev/null || skip_or_fail "strace cannot trace here (ptrace not permitted)"

target_port=$(python3 -c 'import sys, urllib.parse; u = urllib.parse.urlsplit(sys.argv[1]); print(u.port or {"mysql": 3306}.get(u.scheme, 5432))' "$DBLOCK_DSN")
python3 "$DBLOCK_SOURCE_DIR/scripts/bench/delay_proxy.py" --target-port "$target_port" --delay-ms 3 \
  --port-file "$E2E_TMP/proxy.port" --lifetime 300 >/dev/null &
remember_pid $!
wait_for 10 test -s "$E2E_TMP/proxy.port" || { fail "the delay proxy did not start"; finish; }
far_dsn=$(plain_dsn_via "$(cat "$E2E_TMP/proxy.port")")

assert_status "$s: the previous release makes the tables" 0 "$old" init

# Each run of this build traced on its own (its threads, its guard and its command with it):
# what it sends, a statement's text as it is (strace escapes only quotes, backslashes and
# unprintable bytes). --seccomp-bpf stops it only at those calls.
traces=$E2E_TMP/traces
mkdir -p "$traces"
far_old() { DBLOCK_DSN=$far_dsn "$old" "$@"; }
far_new() {
  DBLOCK_DSN=$far_dsn strace -f -qq --seccomp-bpf -s 65536 -e trace=sendto,sendmsg \
    -o "$traces/$BASHPID.$((++traced))" "$new" "$@"
}
traced=0
chaos far far_old far_new

# sent FRAGMENT: how many of this build's runs sent FRAGMENT.
sent() { grep -lF -- "$1" "$traces"/* 2>/dev/null | wc -l; }
runs=$(find "$traces" -type f | wc -l)
# A waiter's later attempts chain too (lock.gate_wait), after a first slice of 500 ms without the
# lock; told here, not required: the chaos's waits rarely reach it.
echo "      $s: lock.gate_wait sent by $(sent 'GET_LOCK(?, ? / 1000) AS got, RELEASE_LOCK(?)') of $runs runs"
for c in "${chained[@]}"; do
  n=$(sent "${c#*:}")
  check "$s: this build's runs at a distance sent ${c%%:*} ($n of $runs runs)" test "$n" -ge 1
done
finish

#!/usr/bin/env bash
# cells: (mysql|postgres):lease
# When the failover lock-delay starts (dblock(1) GUARANTEES, "Failover lock-delay"; issue 50):
# at the first contact with a new incarnation, so that it ends at most one TTL after the
# promotion was first seen, even when the grant survived and its holder runs on. The failover
# is simulated on one server as in test_failover_delay.sh: the record is made to name another
# server (and any lock-delay in force is lifted, so each part starts from a fresh failover).
# Before, only a take of a free key started it: a holder that renewed on the new primary ran
# on, and the delay began when it let go, a whole TTL late (tests/cluster/
# cluster_pg_async_holder_renews.sh shows it on Patroni).
#  - the holder's renewal (PostgreSQL: the renewal itself says so; MySQL reads the record only
#    once a lost connection was made again, as its takes do);
#  - a waiter a live holder refuses;
#  - `dblock renew` of the shell pattern.
source "$(dirname "$0")/lib.sh"

record=${DBLOCK_TABLE_PREFIX}locks
# record_sql SET: an UPDATE of the failover record.
record_sql() {
  case "$DBLOCK_TEST_BACKEND" in
    postgres) server_sql "UPDATE \"$record\" SET $1 WHERE name = E'\\x01failover'" ;;
    mysql) server_sql "UPDATE \`$record\` SET $1 WHERE name = CONCAT(CHAR(1), 'failover')" ;;
  esac
}
simulate_failover() { record_sql "owner = 'the-old-primary', expires_at = NULL"; }
lift_delay() { record_sql "expires_at = NULL"; }
# delay_in_force KEY: status (which only reads the record) shows a lock-delay.
delay_in_force() { [ "$(dblock status "$1" --json | json_field lock_delay)" != null ]; }

k=$(key holder)
assert_status "a first run records the incarnation and a longest TTL of 3 s" 0 dblock run --ttl 3s "$k" -- true

if [ "$DBLOCK_TEST_BACKEND" = postgres ]; then
  # 1. The holder renews (every second) on the "new primary"; nobody else asks.
  start_bg holder dblock run --ttl 3s "$k" -- sleep 6
  check "the holder holds the key" wait_for 10 is_held "$k"
  check "a simulated failover" simulate_failover
  failed_over=$(now_ms)
  check "the holder's renewal alone starts the lock-delay" wait_for 3 delay_in_force "$k"
  echo "# lock-delay seen $(($(now_ms) - failed_over)) ms after the failover"
  start_bg waiter dblock run -w 20 "$k" -- true
  wait_exit holder_status "$holder" 20
  held_until=$(now_ms)
  assert_eq "the holder, whose grant the new primary has, renews on and completes" 0 "$holder_status"
  wait_exit waiter_status "$waiter" 20
  waited=$(($(now_ms) - held_until))
  assert_eq "the waiter runs" 0 "$waiter_status"
  # The lock-delay (3 s) began at the holder's first renewal on the new primary and was over
  # before the holder (6 s) ended: the waiter starts as the holder lets go, not 3 s later.
  assert_between "the waiter ends soon after the holder (ms), the lock-delay over by then" 0 2000 "$waited"
fi

# 2. A waiter refused by a live holder (a lease nobody renews) starts it.
k2=$(key waiter)
assert_status "a shell-pattern holder takes the key" 0 dblock acquire --ttl 3s --owner holder2 "$k2" >/dev/null
check "a simulated failover" simulate_failover
assert_status "a run without -w, refused, exits 75" 75 dblock run "$k2" -- true
check "the refused waiter's contact started the lock-delay" delay_in_force "$k2"
assert_status "the holder releases" 0 dblock release --owner holder2 "$k2"

# 3. The shell pattern's `dblock renew` starts it, and the lease is renewed.
k3=$(key renew)
check "the lock-delay the waiter started is lifted" lift_delay
assert_status "a shell-pattern holder takes the key" 0 dblock acquire --ttl 3s --owner holder3 "$k3" >/dev/null
check "a simulated failover" simulate_failover
assert_status "dblock renew on the new incarnation renews" 0 dblock renew --ttl 3s --owner holder3 "$k3"
check "and started the lock-delay" delay_in_force "$k3"
assert_status "the holder releases" 0 dblock release --owner holder3 "$k3"
finish

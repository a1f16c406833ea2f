#!/usr/bin/env bash
# cells: (mysql|postgres):.*
# The failover lock-delay (dblock(1) GUARANTEES, "Failover lock-delay") on one server, its
# failover simulated: the record of the server's incarnation in <prefix>locks is made to name
# another server, as a promoted replica's record names the old primary. Then:
#  - the next acquisition starts the lock-delay: nothing is granted for the longest TTL
#    recorded (5 s here: a lease renewed for longer raises it), without -w exit 75 naming the
#    failover and until when, with -w it waits it out;
#  - status (table and --json) shows every key blocked, and until when; doctor reports it, and
#    the replication mode;
#  - tokens jump past every token the server knew, by 2^20.
source "$(dirname "$0")/lib.sh"

k=$(key failover)
other=$(key failover-other)
assert_status "a first run records the incarnation and its TTL" 0 dblock run --ttl 3s "$k" -- true
# A lease renewed for longer than any TTL before raises the longest one recorded, so the
# lock-delay still outlasts it: 5 s from here on.
renewed=$(key failover-renewed)
assert_status "a lease taken for 2 s" 0 dblock -s lease acquire --ttl 2s --owner renewer "$renewed"
assert_status "renewed for 5 s" 0 dblock -s lease renew --ttl 5s --owner renewer "$renewed"
assert_status "and released" 0 dblock -s lease release --owner renewer "$renewed"
dblock doctor >"$E2E_TMP/doctor" 2>&1
case "$DBLOCK_TEST_BACKEND" in
  postgres) check "doctor reports the replication mode" grep -q "replication: synchronous_commit=" "$E2E_TMP/doctor" ;;
  mysql) check "doctor reports whether it is Galera" grep -q "galera: not a Galera cluster" "$E2E_TMP/doctor" ;;
esac
check "doctor reports the incarnation recorded and no lock-delay" \
  grep -q "failover.*incarnation .* recorded; no lock-delay in force" "$E2E_TMP/doctor"
check "doctor: the renewal's 5 s is the longest TTL recorded" \
  grep -q "failover.*nothing is granted for 5s (the longest TTL recorded)" "$E2E_TMP/doctor"
before=$(status_field "$k" token)
record=${DBLOCK_TABLE_PREFIX}locks
case "$DBLOCK_TEST_BACKEND" in
  postgres) simulate="UPDATE \"$record\" SET owner = 'the-old-primary' WHERE name = E'\\x01failover'" ;;
  mysql) simulate="UPDATE \`$record\` SET owner = 'the-old-primary' WHERE name = CONCAT(CHAR(1), 'failover')" ;;
esac
check "the record now names another server (a simulated failover)" server_sql "$simulate"
dblock doctor >"$E2E_TMP/doctor" 2>&1
check "doctor: another incarnation than the one recorded" grep -q "failover.*another incarnation" "$E2E_TMP/doctor"

start=$(now_ms)
dblock -v run "$other" -- true 2>"$E2E_TMP/err"
rc=$?
assert_eq "during the lock-delay a run without -w skips (75)" 75 "$rc"
check "it names the failover and until when: $(cat "$E2E_TMP/err")" \
  grep -q "blocked by the failover lock-delay (failover from the-old-primary to .*) until 20" "$E2E_TMP/err"
dblock status "$k" >"$E2E_TMP/status.out" 2>"$E2E_TMP/status.err"
check "status says every key is blocked, and until when" \
  grep -q "note: every key is blocked by the failover lock-delay .* until 20" "$E2E_TMP/status.err"
check "status --json: lock_delay with its end" test "$(dblock status "$k" --json | json_field lock_delay.until locks.0.lock_delay_until | awk '{ print ($1 != "null" && $1 == $2) }')" = 1
dblock doctor >"$E2E_TMP/doctor" 2>&1
check "doctor reports the lock-delay in force" grep -q "failover.*lock-delay in force after a failover from the-old-primary" "$E2E_TMP/doctor"

dblock run -w 20 "$k" -- true 2>"$E2E_TMP/err"
rc=$?
waited=$(($(now_ms) - start))
assert_eq "with -w the run waits the lock-delay out" 0 "$rc"
assert_between "it started once the longest TTL recorded (5 s, the renewal's) had passed (ms)" 4500 14000 "$waited"
after=$(status_field "$k" token)
check "tokens jumped past every token the server knew ($before -> $after)" test "$after" -gt $((before + 1048576))
assert_eq "status --json: no lock-delay once it ended" null "$(dblock status "$k" --json | json_field lock_delay)"
assert_status "the next run is granted at once" 0 dblock run "$other" -- true
finish

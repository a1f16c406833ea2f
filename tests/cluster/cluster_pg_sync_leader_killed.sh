#!/usr/bin/env bash
# Patroni with `synchronous_mode: true`, over the multi-host DSN; every strategy of
# DBLOCK_TEST_STRATEGIES (lib.sh) side by side, a key and an oracle log each, on one cluster.
# smoke: sequential runs reach the leader, tokens increase.
# leader killed: while a holder (--ttl 30s) runs a 25 s job, the leader's postmaster, its Patroni
# and every process of that instance die by SIGKILL; once the replica is promoted (Patroni's TTL,
# about 10 s) a competitor with -w 90 asks for the key on the new leader.
#   lease: the grant was replicated synchronously, so the holder renews on the new leader and
#     completes (exit 0);
#   advisory, for-update, txn-insert: the holder's session died with the leader, so its command
#     is stopped at once (exit 76); the server lock is not replicated, but the competitor meets
#     the new timeline and waits out the failover lock-delay first.
# The oracle, per strategy: no overlap, tokens strictly increasing, exactly 2 runs.
CLUSTER_KIND=pg-sync
source "$(dirname "$0")/lib.sh"

for s in "${strategies[@]}"; do DBLOCK_STRATEGY=$s smoke "pg-sync smoke $s" 3; done

declare -A holder competitor
for s in "${strategies[@]}"; do
  run_bg "holder[$s]" "$E2E_TMP/$s.holder" -s "$s" --ttl 30s "$(key "failover-$s")" -- "$ORACLE_JOB" "$E2E_TMP/$s.log" 25
done
for s in "${strategies[@]}"; do
  check "$s: the holder's command started" wait_for 15 grep -qs '^start' "$E2E_TMP/$s.log"
done
kill_leader_and_wait
for s in "${strategies[@]}"; do
  run_bg "competitor[$s]" "$E2E_TMP/$s.competitor" -s "$s" -w 90 "$(key "failover-$s")" -- \
    "$ORACLE_JOB" "$E2E_TMP/$s.log" 0.2
done
for s in "${strategies[@]}"; do
  job_status holder_status 60 "${holder[$s]}"
  job_status competitor_status 120 "${competitor[$s]}"
  expected=76 why="$s: the holder's session died with the leader: its command is stopped (exit 76)"
  [ "$s" = lease ] && expected=0 why="lease: the holder rode out the failover (its grant was replicated) and exits 0"
  assert_eq "$why" "$expected" "$holder_status"
  [ "$holder_status" = "$expected" ] || sed 's/^/    holder: /' "$E2E_TMP/$s.holder"
  assert_eq "$s: the competitor on the new leader ran and exits 0" 0 "$competitor_status"
  [ "$competitor_status" = 0 ] || sed 's/^/    competitor: /' "$E2E_TMP/$s.competitor"
  oracle_check "$s: leader killed, sync: holder and competitor one at a time, tokens increasing" "$E2E_TMP/$s.log" 2
  report_gap "$E2E_TMP/$s.log" "$s"
  echo "# $s: the holder's command ended $(first_end_after "$E2E_TMP/$s.log" killed) after the kill"
done
finish

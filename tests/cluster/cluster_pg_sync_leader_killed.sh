#!/usr/bin/env bash
# Patroni with `synchronous_mode: true`, lease strategy, over the multi-host DSN.
# smoke: sequential runs reach the leader, tokens increase.
# leader killed: while a holder (--ttl 30s) runs a 25 s job, the leader's postmaster, its Patroni
# and every process of that instance die by SIGKILL; once the replica is promoted (Patroni's TTL,
# about 10 s) a competitor with -w 60 asks for the key on the new leader. The grant was
# replicated synchronously, so the holder renews on the new leader and completes; the oracle:
# no overlap, tokens strictly increasing, exactly 2 runs.
CLUSTER_KIND=pg-sync
source "$(dirname "$0")/lib.sh"

smoke "pg-sync smoke" 3

log=$E2E_TMP/failover.log
k=$(key failover)
run_bg holder "$E2E_TMP/holder.out" --ttl 30s "$k" -- "$ORACLE_JOB" "$log" 25
check "the holder's command started" wait_for 15 grep -qs '^start' "$log"
kill_leader_and_wait
run_bg competitor "$E2E_TMP/competitor.out" -w 60 "$k" -- "$ORACLE_JOB" "$log" 0.2
job_status holder_status 60 "$holder"
job_status competitor_status 60 "$competitor"
assert_eq "the holder rode out the failover (its grant was replicated) and exits 0" 0 "$holder_status"
[ "$holder_status" = 0 ] || sed 's/^/    holder: /' "$E2E_TMP/holder.out"
assert_eq "the competitor on the new leader ran and exits 0" 0 "$competitor_status"
[ "$competitor_status" = 0 ] || sed 's/^/    competitor: /' "$E2E_TMP/competitor.out"
oracle_check "leader killed, sync: holder and competitor one at a time, tokens increasing" "$log" 2
report_gap "$log"
finish

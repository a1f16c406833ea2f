#!/usr/bin/env bash
# A three-node MariaDB Galera cluster, lease strategy, each dblock on one node's DSN.
# smoke: sequential runs on nodes 1, 2, 3 in turn, tokens increase across nodes.
# (a) a bystander killed: the holder (node 1, --ttl 20s, a 12 s job) holds while node 3 dies by
#     SIGKILL; a competitor on node 2 (-w 60) runs after the holder's command, never alongside.
# (b) the holder's node killed: the holder (node 1, --ttl 10s, a 30 s job) cannot renew, so it
#     ends its command before its lease can expire (exit 76); the competitor on node 2 runs
#     once the lease has expired, never alongside.
# whole-cluster restart: every node stops and the cluster is bootstrapped again; runs go on
# with greater tokens.
CLUSTER_KIND=galera
source "$(dirname "$0")/lib.sh"

smoke "galera smoke" 3 "$(galera_dsn 1)" "$(galera_dsn 2)" "$(galera_dsn 3)"

# scenario NAME TTL JOB_SECONDS NODE_TO_KILL: the holder on node 1, the competitor on node 2;
# leaves their statuses in $holder_status and $competitor_status.
scenario() {
  local name=$1 ttl=$2 job=$3 victim=$4 k holder competitor
  log=$E2E_TMP/$name.log
  k=$(key "$name")
  DBLOCK_DSN=$(galera_dsn 1) dblock -v run --ttl "$ttl" "$k" -- "$ORACLE_JOB" "$log" "$job" >"$E2E_TMP/$name.holder" 2>&1 &
  holder=$!
  remember_pid "$holder"
  check "$name: the holder's command started" wait_for 15 grep -qs '^start' "$log"
  DBLOCK_DSN=$(galera_dsn 2) dblock -v run -w 60 "$k" -- "$ORACLE_JOB" "$log" 0.2 >"$E2E_TMP/$name.competitor" 2>&1 &
  competitor=$!
  remember_pid "$competitor"
  check "$name: the competitor on node 2 is waiting" wait_for 15 grep -qs 'retrying in' "$E2E_TMP/$name.competitor"
  mark "$name.killed"
  check "$name: node $victim killed" cluster_ctl kill-node "$victim"
  job_status holder_status 90 "$holder"
  job_status competitor_status 90 "$competitor"
  [ "$competitor_status" = 0 ] || sed 's/^/    competitor: /' "$E2E_TMP/$name.competitor"
  report_gap "$log"
  # Galera's certification failure on concurrent writes (1213, deadlock) must read as busy.
  echo "# $name: the competitor's output names a deadlock/1213 $(grep -ciE 'deadlock|1213' "$E2E_TMP/$name.competitor") times," \
    "the holder's $(grep -ciE 'deadlock|1213' "$E2E_TMP/$name.holder")"
}

scenario bystander 20s 12 3
assert_eq "bystander killed: the holder completes (exit 0)" 0 "$holder_status"
[ "$holder_status" = 0 ] || sed 's/^/    holder: /' "$E2E_TMP/bystander.holder"
assert_eq "bystander killed: the competitor runs after it (exit 0)" 0 "$competitor_status"
oracle_check "bystander killed: holder and competitor one at a time, tokens increasing" "$log" 2
check "node 3 rejoins" cluster_ctl start-node 3

scenario holders_node 10s 30 1
assert_eq "the holder's node killed: the holder gives up its command in time (exit 76)" 76 "$holder_status"
[ "$holder_status" = 76 ] || sed 's/^/    holder: /' "$E2E_TMP/holders_node.holder"
assert_eq "the holder's node killed: the competitor runs once the lease expired (exit 0)" 0 "$competitor_status"
oracle_check "the holder's node killed: holder and competitor one at a time, tokens increasing" "$log" 2
check "node 1 rejoins" cluster_ctl start-node 1

mark restart
check "the whole cluster restarts" cluster_ctl restart
echo "# the cluster restarted in $(($(now_ms) - $(figure restart))) ms"
smoke "galera smoke" 3 "$(galera_dsn 3)" "$(galera_dsn 1)" "$(galera_dsn 2)"
finish

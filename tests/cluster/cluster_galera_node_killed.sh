#!/usr/bin/env bash
# A three-node MariaDB Galera cluster, each dblock on one node's DSN; every strategy of
# DBLOCK_TEST_STRATEGIES (lib.sh) side by side, a key and an oracle log each.
# smoke: sequential runs on nodes 1, 2, 3 in turn, tokens increase across nodes.
# concurrent takes: nine runs of a key at once, three per node. Galera certifies each write
#   against the cluster's at commit, so takes on two nodes at once fail certification (1213,
#   ER_LOCK_DEADLOCK), which must read as busy: exit 75 without -w, go on waiting with -w.
#   Nine at once meet such a conflict only now and then, so the rounds that must meet one hold
#   the key's row on nodes 2 and 3 first (take_at_once ... held): a conflict every round.
# advisory, for-update, txn-insert: refused. GET_LOCK and row locks are node-local, so `run`
#   exits 78 on every node, naming Galera and lease, and its command never runs; doctor's galera
#   line fails them (and passes lease). The rest runs lease only.
# lease only:
# (a) a bystander killed: the holder (node 1, --ttl 20s, a 12 s job) holds while node 3 dies by
#     SIGKILL; a competitor on node 2 (-w 60) runs after the holder's command, never alongside.
# (b) the holder's node killed: the holder (node 1, --ttl 10s, a 30 s job) cannot renew, so it
#     ends its command before its lease can expire (exit 76); the competitor on node 2 runs
#     once the lease has expired, never alongside.
# whole-cluster restart: every node stops and the cluster is bootstrapped again; runs go on
# with greater tokens.
# (Before session strategies were refused, (b) measured what "unsafe" means: the competitor on
# node 2 was not held back by the holder's server lock on node 1 and ran alongside it, 123-362 ms
# until node 1 died.)
CLUSTER_KIND=galera
source "$(dirname "$0")/lib.sh"

has_lease=no
session_strategies=()
for s in "${strategies[@]}"; do
  if [ "$s" = lease ]; then has_lease=yes; else session_strategies+=("$s"); fi
done
galera_dsns=("$(galera_dsn 1)" "$(galera_dsn 2)" "$(galera_dsn 3)")

for s in "${session_strategies[@]}"; do
  for n in 1 2 3; do
    status=0
    DBLOCK_DSN=$(galera_dsn "$n") dblock -s "$s" run "$(key "refused-$s")" -- touch "$E2E_TMP/ran.$s" \
      2>"$E2E_TMP/refused.$s" || status=$?
    assert_eq "$s on node $n: run is refused (78)" 78 "$status"
    check "$s on node $n: the message names Galera and lease" \
      grep -q "cannot hold on a Galera cluster.*Use --strategy lease" "$E2E_TMP/refused.$s"
  done
  check "$s: its command never ran" test ! -e "$E2E_TMP/ran.$s"
done
for s in "${strategies[@]}"; do
  dblock -s "$s" doctor >"$E2E_TMP/doctor.$s" 2>&1
  if [ "$s" = lease ]; then
    check "lease: doctor's galera line passes" grep -q '^ok *galera: .*lease strategy is safe' "$E2E_TMP/doctor.$s"
  else
    check "$s: doctor's galera line fails: $s is unsafe on Galera" grep -q "^FAIL *galera: .* $s is unsafe" "$E2E_TMP/doctor.$s"
  fi
done
[ "$has_lease" = yes ] || finish
strategies=(lease)
# A run right after another node's may fail certification against that run's writes, not yet
# applied on its node (seen once in 45 first runs of a new table prefix): busy, so the smoke
# runs wait a little (-w).
smoke_wait=10

for s in "${strategies[@]}"; do DBLOCK_STRATEGY=$s smoke "galera smoke $s" 3 "${galera_dsns[@]}"; done

# node_sql N SQL: SQL on node N. server_sql reads E2E_SQL_DSN (tests/e2e/lib.sh), node 1's
# unless told: a DBLOCK_DSN given to it is not read (it was, until the TLS tests gave server_sql
# a DSN of its own; since then every node's SQL here went to node 1).
node_sql() { E2E_SQL_DSN=$(galera_dsn "$1") server_sql "$2"; }
# on_nodes SQL: SQL on every node.
on_nodes() { local n; for n in 1 2 3; do node_sql "$n" "$1" || return; done; }
# conflicts: certification failures and transactions aborted for a replicated one, all nodes.
conflicts() {
  local n sum=0 v
  for n in 1 2 3; do
    for v in $(node_sql "$n" "SHOW GLOBAL STATUS WHERE Variable_name IN
        ('wsrep_local_cert_failures', 'wsrep_local_bf_aborts')" | cut -f2); do
      sum=$((sum + v))
    done
  done
  echo "$sum"
}

# take_at_once S LOG WAIT [held]: nine `dblock run` of S's key at once, three per node, each
# running the oracle job for 0.2 s (with WAIT: `-w WAIT`), their output appended to LOG's .out;
# their exit statuses, sorted, in $statuses.
# They start together: each waits at its node's FIFO, and the FIFOs open at once, so a busy
# machine's forks one after another do not spread the nine takes out.
# Still, nine takes at once meet a certification conflict only now and then: it needs two nodes'
# takes to overlap up to their commits (on two loaded cores 40 rounds once met none). With
# `held`, every round meets one: nodes 2 and 3 each hold the key's row first (hold_row); their
# six takes start and wait for it, and node 1's three start only then ($waiting: how many
# waited on node 2 and on node 3). Node 1's take commits first; nodes 2 and 3, applying it,
# abort the holder and every take waiting behind it (their transactions began before it),
# and each aborted take reads 1213, as a certification failure does.
take_at_once() {
  local s=$1 log=$2 wait=$3 held=${4:-} n i pids=() pid status gate=$E2E_TMP/at-once.gate dsn k
  k=$(key "at-once-$s")
  for n in 1 2 3; do
    rm -f "$gate.$n"
    mkfifo "$gate.$n"
  done
  if [ "$held" = held ]; then for n in 2 3; do hold_row "$n" "$k"; done; fi
  for n in 1 2 3; do
    dsn=$(galera_dsn "$n")
    for i in 1 2 3; do
      (
        read -r _ <"$gate.$n" || true
        DBLOCK_DSN=$dsn exec dblock -s "$s" -v run ${wait:+-w "$wait"} "$k" -- "$ORACLE_JOB" "$log" 0.2 \
          >>"${log%.log}.out" 2>&1
      ) &
      pids+=($!)
      remember_pid "$!"
    done
  done
  # The readers block in open() until a writer opens; once all nine wait there, open and
  # close each FIFO: its readers read EOF at the same moment.
  wait_for 10 eval '[ "$(at_gate "${pids[@]}")" -ge 9 ]' || true
  waiting=
  if [ "$held" = held ]; then
    : >"$gate.2"
    : >"$gate.3"
    wait_for 20 eval '[ "$(lock_waits 2)" -ge 3 ] && [ "$(lock_waits 3)" -ge 3 ]' || true
    waiting="$(lock_waits 2) and $(lock_waits 3)"
    : >"$gate.1"
  else
    for n in 1 2 3; do : >"$gate.$n"; done
  fi
  statuses=
  for pid in "${pids[@]}"; do
    status=0
    wait "$pid" || status=$?
    statuses="$statuses $status"
  done
  statuses=$(echo $statuses | tr ' ' '\n' | sort -n | tr '\n' ' ')
  [ "$held" != held ] || let_go
}
# hold_row N KEY: in the background, a transaction on node N that locks KEY's row for update
# and keeps it (20 s at most, DO SLEEP); returns once it holds the row. Its client's output is
# in $E2E_TMP/held.N.
holder_pids=()
hold_row() {
  node_sql "$1" "BEGIN; SELECT name FROM ${DBLOCK_TABLE_PREFIX}locks WHERE name = '$2' FOR UPDATE; DO SLEEP(20)" \
    >"$E2E_TMP/held.$1" 2>&1 &
  holder_pids[$1]=$!
  remember_pid "$!"
  wait_for 10 eval '[ -n "$(holder_id '"$1"')" ]' || true
}
# holder_id N: the connection id of node N's holder while it holds the row.
holder_id() { node_sql "$1" "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO = 'DO SLEEP(20)'"; }
# lock_waits N: how many transactions on node N wait for a row lock.
lock_waits() { node_sql "$1" "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'"; }
# let_go: every holder that still holds its row is killed (which rolls it back); how many were
# aborted by the replicated take before (1213 in their output) in $holders_aborted: each one
# counts as a conflict on its node, though not a take's.
let_go() {
  local n id
  holders_aborted=0
  for n in "${!holder_pids[@]}"; do
    id=$(holder_id "$n")
    [ -z "$id" ] || node_sql "$n" "KILL $id" >/dev/null 2>&1 || true
    wait "${holder_pids[$n]}" 2>/dev/null || true
    ! grep -q 'ERROR 1213' "$E2E_TMP/held.$n" || holders_aborted=$((holders_aborted + 1))
  done
  holder_pids=()
}
# at_gate PID...: how many of PIDs wait to open a FIFO for reading (blocked in open(), which
# the kernel shows as their wait channel: wait_for_partner, fifo_open on older kernels).
at_gate() {
  local pid n=0
  for pid in "$@"; do
    case $(cat "/proc/$pid/wchan" 2>/dev/null) in wait_for_partner | fifo_open) n=$((n + 1)) ;; esac
  done
  echo "$n"
}
# counted STATUS...: "N x STATUS" per status.
counted() { printf '%s\n' "$@" | sort -n | uniq -c | awk '{ printf " %s x %s", $1, $2 }'; }

# The server retries an autocommit statement that failed certification once by itself: not at
# all for now, so the failures reach dblock.
check "certification failures reach the client (wsrep_retry_autocommit = 0)" on_nodes "SET GLOBAL wsrep_retry_autocommit = 0"
for s in "${strategies[@]}"; do
  # Once as they come (the key's row is made here), then held: a conflict every time.
  take_at_once "$s" "$E2E_TMP/at-once.$s.log" ""
  all=$statuses
  before=$(conflicts)
  take_at_once "$s" "$E2E_TMP/at-once.$s.log" "" held
  all="$all $statuses"
  seen=$(($(conflicts) - before - holders_aborted))
  check "$s: nine takes on three nodes, six waiting behind a held row ($waiting), met $seen certification conflicts" \
    test "$seen" -gt 0
  odd=$(echo $all | tr ' ' '\n' | grep -Ev '^(0|75)$' | tr '\n' ' ')
  check "$s: without -w every take exits 0 or 75 (exits:$(counted $all))" test -z "$odd"
  oracle_check "$s: the takes without -w that ran, one at a time, tokens increasing" "$E2E_TMP/at-once.$s.log" \
    "$(echo $all | tr ' ' '\n' | grep -c '^0$')"
  before=$(conflicts)
  take_at_once "$s" "$E2E_TMP/at-once-w.$s.log" 60 held
  seen=$(($(conflicts) - before - holders_aborted))
  check "$s: with -w, six waiting behind a held row ($waiting), met $seen certification conflicts" test "$seen" -gt 0
  assert_eq "$s: with -w all nine run (exits: $statuses)" "0 0 0 0 0 0 0 0 0 " "$statuses"
  oracle_check "$s: nine takes at once with -w, one at a time, tokens increasing" "$E2E_TMP/at-once-w.$s.log" 9
  # (A release that fails certification leaves the exit status the command's: not a take. A
  # take refused by one is held elsewhere, which -v says with the server's words.)
  told=$(cat "$E2E_TMP/at-once.$s.out" "$E2E_TMP/at-once-w.$s.out" | grep -cE 'errno 1213.*taken as held elsewhere' || true)
  check "$s: -v tells the takes a certification conflict refused as held elsewhere ($told)" test "$told" -gt 0
  odd=$(grep -hE 'errno 1213|[Dd]eadlock' "$E2E_TMP/at-once.$s.out" "$E2E_TMP/at-once-w.$s.out" |
    grep -v 'could not release' | grep -v 'taken as held elsewhere' | head -n 1)
  check "$s: no take ends in an error naming 1213${odd:+: $odd}" test -z "$odd"
done
check "wsrep_retry_autocommit back to 1" on_nodes "SET GLOBAL wsrep_retry_autocommit = 1"

# scenario NAME TTL JOB_SECONDS NODE_TO_KILL: per strategy, the holder on node 1, the competitor
# on node 2; leaves their statuses in ${holder_status[S]} and ${competitor_status[S]}, the
# oracle logs in $E2E_TMP/NAME.S.log.
declare -A holder_status competitor_status
scenario() {
  local name=$1 ttl=$2 job=$3 victim=$4 k s log holder competitor
  declare -A holder competitor
  for s in "${strategies[@]}"; do
    DBLOCK_DSN=$(galera_dsn 1) run_bg "holder[$s]" "$E2E_TMP/$name.$s.holder" -s "$s" --ttl "$ttl" \
      "$(key "$name-$s")" -- "$ORACLE_JOB" "$E2E_TMP/$name.$s.log" "$job"
  done
  for s in "${strategies[@]}"; do
    check "$name, $s: the holder's command started" wait_for 15 grep -qs '^start' "$E2E_TMP/$name.$s.log"
    DBLOCK_DSN=$(galera_dsn 2) run_bg "competitor[$s]" "$E2E_TMP/$name.$s.competitor" -s "$s" -w 60 \
      "$(key "$name-$s")" -- "$ORACLE_JOB" "$E2E_TMP/$name.$s.log" 0.2
  done
  for s in "${strategies[@]}"; do
    check "$name, $s: the competitor on node 2 is waiting" wait_for 15 grep -qs 'retrying in' "$E2E_TMP/$name.$s.competitor"
  done
  mark "$name.killed"
  check "$name: node $victim killed" cluster_ctl kill-node "$victim"
  for s in "${strategies[@]}"; do
    job_status "holder_status[$s]" 90 "${holder[$s]}"
    job_status "competitor_status[$s]" 90 "${competitor[$s]}"
    [ "${competitor_status[$s]}" = 0 ] || sed 's/^/    competitor: /' "$E2E_TMP/$name.$s.competitor"
    report_gap "$E2E_TMP/$name.$s.log" "$name, $s"
    echo "# $name, $s: the holder's command ended $(first_end_after "$E2E_TMP/$name.$s.log" "$name.killed") after the kill"
  done
}

scenario bystander 20s 12 3
assert_eq "bystander killed: the holder completes (exit 0)" 0 "${holder_status[lease]}"
[ "${holder_status[lease]}" = 0 ] || sed 's/^/    holder: /' "$E2E_TMP/bystander.lease.holder"
assert_eq "bystander killed: the competitor runs after it (exit 0)" 0 "${competitor_status[lease]}"
oracle_check "bystander killed: holder and competitor one at a time, tokens increasing" "$E2E_TMP/bystander.lease.log" 2
check "node 3 rejoins" cluster_ctl start-node 3

scenario holders_node 10s 30 1
for s in "${strategies[@]}"; do
  log=$E2E_TMP/holders_node.$s.log
  assert_eq "the holder's node killed, $s: the holder gives up its command in time (exit 76)" 76 "${holder_status[$s]}"
  [ "${holder_status[$s]}" = 76 ] || sed 's/^/    holder: /' "$E2E_TMP/holders_node.$s.holder"
  assert_eq "the holder's node killed, lease: the competitor runs once the lease expired (exit 0)" 0 "${competitor_status[$s]}"
  oracle_check "the holder's node killed, lease: holder and competitor one at a time, tokens increasing" "$log" 2
done

check "node 1 rejoins" cluster_ctl start-node 1
mark restart
check "the whole cluster restarts" cluster_ctl restart
echo "# the cluster restarted in $(($(now_ms) - $(figure restart))) ms"
DBLOCK_STRATEGY=lease smoke "galera smoke lease" 3 "$(galera_dsn 3)" "$(galera_dsn 1)" "$(galera_dsn 2)"
finish

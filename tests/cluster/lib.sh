# Shared by the cluster failover scripts (tests/cluster/cluster_*.sh): sourced, never run.
#   CLUSTER_KIND=pg-sync|pg-async|galera; source "$(dirname "$0")/lib.sh"
# starts a cluster of its own with scripts/test-cluster.sh (its own state file, so cluster tests
# never share or disturb a cluster), points the cell's DSN at it and then sources
# tests/faults/lib.sh (the oracle, the helpers, `finish`). The cluster is stopped when the
# script exits, whatever happens. Without the tools the cluster needs the script skips, or
# fails when CI=true.
# For PostgreSQL, DBLOCK_DSN is the multi-host DSN of both members (target_session_attrs=
# read-write), so every dblock reaches the leader; for Galera it is node 1 and the DSN of node
# N is $(galera_dsn N).

CLUSTER_SOURCE_DIR=${DBLOCK_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
# DBLOCK_TEST_CLUSTER_CTL: a stand-in for it (e2e.test_cluster_state's, which starts nothing).
CLUSTER_CTL=${DBLOCK_TEST_CLUSTER_CTL:-$CLUSTER_SOURCE_DIR/scripts/test-cluster.sh}

cluster_skip_or_fail() {
  if [ "${CI:-}" = true ]; then
    echo "FAIL  $1 (CI=true: cluster tests must not be skipped)"
    exit 1
  fi
  echo "SKIP  $1"
  exit 77
}

cluster_tools_required() {
  [ "$(id -u)" -eq 0 ] || cluster_skip_or_fail "the cluster runs its servers as other users: run as root"
  local tool
  case "$CLUSTER_KIND" in
    pg-*)
      for tool in patroni etcd psql; do
        command -v "$tool" >/dev/null || cluster_skip_or_fail "no $tool (scripts/install-deps.sh installs it)"
      done
      ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || cluster_skip_or_fail "no PostgreSQL server"
      ;;
    galera)
      for tool in /usr/sbin/mariadbd /usr/lib/galera/libgalera_smm.so /usr/bin/rsync; do
        [ -e "$tool" ] || cluster_skip_or_fail "no $tool (scripts/install-deps.sh installs it)"
      done
      ;;
    *) echo "FAIL  unknown CLUSTER_KIND '${CLUSTER_KIND:-}'"; exit 1 ;;
  esac
}

cluster_tools_required
export DBLOCK_TEST_CLUSTER_STATE
DBLOCK_TEST_CLUSTER_STATE=$(mktemp "${TMPDIR:-/tmp}/dblock-cluster-test.XXXXXX")
cluster_stop() { "$CLUSTER_CTL" stop; rm -f "$DBLOCK_TEST_CLUSTER_STATE"; }
trap cluster_stop EXIT
cluster_started_ms=$(($(date +%s%N) / 1000000))
if ! cluster_env=$("$CLUSTER_CTL" start "$CLUSTER_KIND"); then
  echo "FAIL  scripts/test-cluster.sh start $CLUSTER_KIND (its log is above)"
  exit 1
fi
eval "$cluster_env"
echo "# the $CLUSTER_KIND cluster started in $(($(date +%s%N) / 1000000 - cluster_started_ms)) ms"
case "$CLUSTER_KIND" in
  pg-*) DBLOCK_TEST_BACKEND=postgres DBLOCK_TEST_POSTGRES_DSN=$DBLOCK_TEST_CLUSTER_PG_DSN ;;
  galera) DBLOCK_TEST_BACKEND=mysql DBLOCK_TEST_MYSQL_DSN=$DBLOCK_TEST_CLUSTER_GALERA1_DSN ;;
esac
DBLOCK_TEST_STRATEGY=${DBLOCK_TEST_STRATEGY:-lease}
export DBLOCK_TEST_BACKEND DBLOCK_TEST_POSTGRES_DSN DBLOCK_TEST_MYSQL_DSN DBLOCK_TEST_STRATEGY
# The strategies a script runs side by side on one cluster, a key and an oracle log each:
# DBLOCK_TEST_STRATEGIES (space separated; tests/CMakeLists.txt registers `<name>.session` with
# the three session strategies), else the cell's one strategy.
read -r -a strategies <<<"${DBLOCK_TEST_STRATEGIES:-$DBLOCK_TEST_STRATEGY}"
# e2e/lib.sh (through faults/lib.sh) sets the EXIT trap anew, and may exit while it is sourced
# (no dblock binary, say): the cluster's stop goes among its exit hooks before, so it runs
# whatever happens from here on.
e2e_exit_hooks=(cluster_stop)
source "$CLUSTER_SOURCE_DIR/tests/faults/lib.sh"

# cluster_ctl VERB [ARG]: scripts/test-cluster.sh on this script's cluster.
cluster_ctl() { "$CLUSTER_CTL" "$@"; }

galera_dsn() { local v=DBLOCK_TEST_CLUSTER_GALERA$1_DSN; echo "${!v}"; }

# smoke NAME RUNS [DSN...]: RUNS sequential `dblock run` of NAME's key, the DSNs taken in turn
# (default: DBLOCK_DSN), each command logging to NAME's oracle log; with smoke_wait set, each
# run waits that long for the key (-w). Calls with the same NAME go on
# with the same key and log: the oracle checks every run of NAME so far happened one at a
# time, tokens strictly increasing.
declare -A smoke_runs=()
smoke() {
  local name=$1 runs=$2 i dsns status log
  shift 2
  dsns=("$@")
  [ ${#dsns[@]} -gt 0 ] || dsns=("$DBLOCK_DSN")
  log=$E2E_TMP/smoke.${name//[^a-z0-9]/_}.log
  for i in $(seq "$runs"); do
    status=0
    DBLOCK_DSN=${dsns[$(((i - 1) % ${#dsns[@]}))]} dblock run ${smoke_wait:+-w "$smoke_wait"} \
      "$(key "smoke-${name//[^a-z0-9]/_}")" -- \
      "$ORACLE_JOB" "$log" 0 2>"$E2E_TMP/smoke.err" || status=$?
    [ "$status" = 0 ] || { fail "$name: run $i exits $status: $(cat "$E2E_TMP/smoke.err")"; return; }
  done
  smoke_runs[$name]=$((${smoke_runs[$name]:-0} + runs))
  oracle_check "$name: ${smoke_runs[$name]} runs so far, one at a time, tokens increasing ($(tokens_of "$log"))" \
    "$log" "${smoke_runs[$name]}"
}

# run_bg VAR OUT RUN_ARGS...: `dblock -v run RUN_ARGS...` in the background, its output in OUT,
# its pid in VAR (remembered for the cleanup).
run_bg() {
  local var=$1 out=$2
  shift 2
  dblock -v run "$@" >"$out" 2>&1 &
  printf -v "$var" %s "$!"
  remember_pid "$!"
}

# kill_leader_and_wait: the Patroni leader dies (test-cluster.sh kill-leader: SIGKILL of its
# postmaster, its Patroni and the instance's processes); returns once another member is leader
# and takes writes, and says how long that took (figures `killed` and `promoted`).
kill_leader_and_wait() {
  local old new
  mark killed
  old=$(cluster_ctl kill-leader)
  new=$(cluster_ctl wait-leader 60)
  mark promoted
  echo "# leader $old killed; $new took writes $(($(figure promoted) - $(figure killed))) ms later"
  check "a new leader (${new:-none}) is not the killed one (${old:-none})" test -n "$new" -a "$new" != "$old"
}

# starts_at_least LOG N: the log shows N starts or more.
starts_at_least() { [ "$(grep -c '^start' "$1" 2>/dev/null)" -ge "$2" ]; }

# tokens_of LOG: the log's tokens in start order, space separated.
tokens_of() { awk '$1 == "start" { print $2 }' "$1" | tr '\n' ' ' | sed 's/ $//'; }

# report_gap LOG [NAME]: the gap between the first run's end and the second's start (negative:
# they overlapped), and the tokens.
report_gap() {
  local first second
  first=$(awk '$1 == "start" { print $2; exit }' "$1")
  second=$(awk -v f="$first" '$1 == "start" && $2 != f { print $2; exit }' "$1")
  if [ -n "$second" ] && [ -n "$(oracle_time "$1" "$first" end)" ]; then
    echo "# ${2:+$2: }tokens $(tokens_of "$1"); the second run started $(($(oracle_time "$1" "$second" start) - $(oracle_time "$1" "$first" end))) ms after the first ended"
  else
    echo "# ${2:+$2: }tokens $(tokens_of "$1")"
  fi
}

# first_end_after LOG MARK: ms from the figure MARK to the end of the log's first run, or never.
first_end_after() {
  local first end
  first=$(awk '$1 == "start" { print $2; exit }' "$1")
  end=$(oracle_time "$1" "$first" end)
  if [ -n "$end" ]; then echo "$((end - $(figure "$2"))) ms"; else echo never; fi
}

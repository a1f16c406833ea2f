#!/usr/bin/env bash
# scripts/test-cluster.sh never stops a cluster it did not start: `start` given a state file
# that names a cluster refuses (exit 1, saying how to stop that one) and leaves its processes
# and state file alone; without DBLOCK_TEST_CLUSTER_STATE, start makes a state file of its own
# and the other verbs (stop included) act on nothing, never on a default state file. No real
# cluster is started: the "cluster" is a sleep in a temp dir, and a failing mktemp first on PATH
# ends any start that gets past the check.
source "$(dirname "$0")/lib.sh"
ctl=$DBLOCK_SOURCE_DIR/scripts/test-cluster.sh

stub=$E2E_TMP/stub
mkdir -p "$stub"
printf '#!/bin/sh\necho "stub mktemp: no cluster is started by this test" >&2\nexit 1\n' >"$stub/mktemp"
chmod +x "$stub/mktemp"

# Another invocation's cluster: its temp dir, its etcd's pid file, a process working there.
other=$E2E_TMP/other-cluster
mkdir -p "$other/etcd"
(cd "$other" && { sleep 600 & echo $! >"$other/etcd/etcd.pid"; })
# Alive and not a zombie (a killed process lingers as one until its parent reaps it).
running() { [ -e "/proc/$1" ] && [ "$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null)" != Z ]; }
sleeper=$(cat "$other/etcd/etcd.pid")
remember_pid "$sleeper"
state=$E2E_TMP/other.state
echo "$other" >"$state"

DBLOCK_TEST_CLUSTER_STATE=$state PATH="$stub:$PATH" "$ctl" start pg-async >"$E2E_TMP/out" 2>"$E2E_TMP/err"
assert_eq "start on a state file that names a cluster fails" 1 $?
sed 's/^/    | /' "$E2E_TMP/err"
check "it says the state file already names a cluster" grep -q "already names a cluster ($other)" "$E2E_TMP/err"
check "and how to stop that one" grep -qF "DBLOCK_TEST_CLUSTER_STATE=$state $ctl stop" "$E2E_TMP/err"
check "the other cluster's process still runs" running "$sleeper"
assert_eq "its state file is untouched" "$other" "$(cat "$state" 2>/dev/null)"
check "its dir is untouched" test -f "$other/etcd/etcd.pid"

# No state file named: no verb acts on a default one.
for verb in stop env kill-leader; do
  env -u DBLOCK_TEST_CLUSTER_STATE PATH="$stub:$PATH" "$ctl" $verb >/dev/null 2>"$E2E_TMP/err"
  assert_eq "$verb without DBLOCK_TEST_CLUSTER_STATE fails" 1 $?
  check "$verb asks which cluster" grep -q "which cluster? Set DBLOCK_TEST_CLUSTER_STATE" "$E2E_TMP/err"
done
check "the other cluster's process still runs" running "$sleeper"

# A state file that names no cluster (empty, as tests/cluster/lib.sh makes it) is taken: the
# start goes on to make its temp dir (where the stub stops it).
: >"$E2E_TMP/empty.state"
DBLOCK_TEST_CLUSTER_STATE=$E2E_TMP/empty.state PATH="$stub:$PATH" "$ctl" start pg-async >/dev/null 2>"$E2E_TMP/err"
if [ "$(id -u)" -eq 0 ]; then
  check "an empty state file is taken (start reaches mktemp)" grep -q "stub mktemp" "$E2E_TMP/err"
else
  check "an empty state file is taken (start reaches its root check)" grep -q "run as root" "$E2E_TMP/err"
fi

# The named cluster is stopped when asked by its state file (what stop is for).
DBLOCK_TEST_CLUSTER_STATE=$state "$ctl" stop 2>"$E2E_TMP/err"
assert_eq "stop with its state file" 0 $?
gone() { ! running "$1"; }
check "its process is gone" wait_for 20 gone "$sleeper"
check "its state file is removed" test ! -e "$state"

# A cluster script that fails while its libs are still being sourced (here: no dblock binary,
# which tests/e2e/lib.sh checks) stops the cluster it started: a stand-in for test-cluster.sh
# logs the verbs it is given and starts nothing.
fake_ctl=$E2E_TMP/fake-test-cluster.sh
printf '#!/bin/sh\necho "$1" >>"%s"\n[ "$1" = start ] && echo "DBLOCK_TEST_CLUSTER_GALERA1_DSN=mysql://x:y@127.0.0.1:9/x"\nexit 0\n' \
  "$E2E_TMP/ctl.log" >"$fake_ctl"
chmod +x "$fake_ctl"
CI=true CLUSTER_KIND=galera DBLOCK_TEST_CLUSTER_CTL=$fake_ctl DBLOCK_BIN=$E2E_TMP/no-such-dblock \
  bash -c 'source "$1/tests/cluster/lib.sh"' _ "$DBLOCK_SOURCE_DIR" >"$E2E_TMP/out" 2>&1
assert_eq "a cluster script without a dblock binary fails" 1 $?
sed 's/^/    | /' "$E2E_TMP/out"
check "it says why" grep -q "no executable dblock" "$E2E_TMP/out"
assert_eq "the cluster it started is stopped" "start stop" "$(tr '\n' ' ' <"$E2E_TMP/ctl.log" | sed 's/ $//')"
finish

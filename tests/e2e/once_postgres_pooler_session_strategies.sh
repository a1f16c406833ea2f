#!/usr/bin/env bash
# The session strategies behind PgBouncer (scripts/test-servers.sh starts one; its pools hold 3
# server sessions): dblock(1) STRATEGIES says run refuses a session strategy where doctor fails
# it, before anything is taken.
#  - transaction pooling: run with advisory, for-update and txn-insert exits 78, with a message
#    that names transaction pooling and the fixes, and its command never runs, with -w too;
#    acquire exits 78 (it takes only leases); lease runs there as before;
#  - session pooling: each session strategy still holds: a holder, a contender without -w
#    (75, or 0 after the holder when it waited in PgBouncer for a server session) and one
#    with -w that runs once the holder is done, never alongside it.
source "$(dirname "$0")/lib.sh"

[ -n "${DBLOCK_TEST_PGBOUNCER_DSN:-}" ] || skip_or_fail "DBLOCK_TEST_PGBOUNCER_DSN is not set (scripts/test-servers.sh)"
[ -n "${DBLOCK_TEST_PGBOUNCER_SESSION_DSN:-}" ] || skip_or_fail "DBLOCK_TEST_PGBOUNCER_SESSION_DSN is not set"
txn=$DBLOCK_TEST_PGBOUNCER_DSN
session=$DBLOCK_TEST_PGBOUNCER_SESSION_DSN

assert_status "init through transaction pooling" 0 env DBLOCK_DSN="$txn" timeout 60 dblock init

for s in advisory for-update txn-insert; do
  k=$(key "txn-$s")
  DBLOCK_DSN=$txn timeout 60 dblock -s "$s" run "$k" -- touch "$E2E_TMP/ran.$s" 2>"$E2E_TMP/err.$s"
  assert_eq "$s through transaction pooling: run is refused (78)" 78 "$?"
  check "$s: its command did not run" test ! -e "$E2E_TMP/ran.$s"
  check "$s: the message names transaction pooling" grep -q "cannot hold through transaction pooling" "$E2E_TMP/err.$s"
  check "$s: and the fixes" grep -q "Use --strategy lease, or connect to the server directly or through session pooling" \
    "$E2E_TMP/err.$s"
  DBLOCK_DSN=$txn timeout 60 dblock -s "$s" run -w 5s "$k" -- touch "$E2E_TMP/ran.$s" 2>/dev/null
  assert_eq "$s through transaction pooling: run -w is refused at once (78)" 78 "$?"
  check "$s: its command did not run either" test ! -e "$E2E_TMP/ran.$s"
  assert_status "$s through transaction pooling: acquire exits 78" 78 env DBLOCK_DSN="$txn" timeout 60 dblock -s "$s" acquire "$k"
  assert_eq "$s: no run of the key was recorded" 0 "$(history_field "$k" runs.#)"
done

k=$(key txn-lease)
out=$(DBLOCK_DSN=$txn timeout 60 dblock -s lease run "$k" -- echo ran); rc=$?
assert_eq "lease through transaction pooling: run exits 0" 0 "$rc"
assert_eq "lease through transaction pooling: its command ran" ran "$out"

# job NAME: the command of each run, which fails (9) if another run's is inside.
job() { echo "mkdir '$E2E_TMP/in.$1' || exit 9; echo \$DBLOCK_TOKEN >>'$E2E_TMP/tokens.$1'; sleep 1.5; rmdir '$E2E_TMP/in.$1'"; }
for s in advisory for-update txn-insert; do
  k=$(key "session-$s")
  start_bg holder env DBLOCK_DSN="$session" timeout 60 dblock -s "$s" run "$k" -- sh -c "$(job "$s")"
  check "$s through session pooling: the holder's command started" wait_for 15 test -s "$E2E_TMP/tokens.$s"
  # The pool's 3 server sessions may all be taken (the holder's two, other tests'): a contender
  # then waits in PgBouncer for one, past the holder's end, and runs after it. Never alongside.
  DBLOCK_DSN=$session timeout 60 dblock -s "$s" run "$k" -- sh -c "$(job "$s")" 2>/dev/null
  status=$?
  check "$s through session pooling: a contender without -w finds it held (75), or runs after it (0): $status" \
    grep -Eq '^(0|75)$' <<<"$status"
  DBLOCK_DSN=$session timeout 60 dblock -s "$s" run -w 30s "$k" -- sh -c "$(job "$s")"
  assert_eq "$s through session pooling: a contender with -w runs after the holder, not alongside (0)" 0 "$?"
  wait_exit holder_status "$holder" 30
  assert_eq "$s through session pooling: the holder exits 0" 0 "$holder_status"
  runs=$((status == 0 ? 3 : 2))
  assert_eq "$s: $runs runs, one at a time, $runs tokens" "$runs" "$(sort -u "$E2E_TMP/tokens.$s" | wc -l)"
done
finish

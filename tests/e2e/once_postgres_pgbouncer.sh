#!/usr/bin/env bash
# PostgreSQL behind PgBouncer (scripts/test-servers.sh starts one, pools smaller than the
# clients here): README says lease works behind transaction pooling and the session strategies
# do not, and that `dblock doctor` tells which set-up it is.
#  - lease through transaction pooling: runs, waiters (-w) and a race of runs on one key each
#    run their command, never two at once, with a history row per run; and the server logs
#    no error for them (dblock names no prepared statement behind a pooler: another client's
#    transaction on the same server session would find the name taken, or a later one of its
#    own would not find it), and no waiter leaves a session lock behind (the waiters' queue is
#    for direct connections);
#  - doctor: transaction pooling fails the check for a session strategy (78) and passes it for
#    lease; session pooling and a direct connection pass it, each named as what it is; its
#    idle_timeouts line says whether dblock's idle limits reached the server (through
#    PgBouncer they do not: it drops the startup options).
source "$(dirname "$0")/lib.sh"

[ -n "${DBLOCK_TEST_PGBOUNCER_DSN:-}" ] || skip_or_fail "DBLOCK_TEST_PGBOUNCER_DSN is not set (scripts/test-servers.sh)"
[ -n "${DBLOCK_TEST_PGBOUNCER_SESSION_DSN:-}" ] || skip_or_fail "DBLOCK_TEST_PGBOUNCER_SESSION_DSN is not set"
direct=$DBLOCK_DSN
pooled=$DBLOCK_TEST_PGBOUNCER_DSN
db() { DBLOCK_DSN=$pooled timeout 60 dblock "$@"; }
state=${DBLOCK_TEST_SERVERS_STATE:-/tmp/dblock-test-servers.state}
[ -f "$state" ] || skip_or_fail "no test-servers state file $state: the server's log cannot be read"
server_log=$(cat "$state")/pg/server.log
# Errors about a prepared statement of dblock's, whose statement (the next log line) is on this
# test's tables: other tests, in parallel, provoke such errors on purpose.
name_errors() {
  awk -v prefix="\"$DBLOCK_TABLE_PREFIX" '
    /ERROR:  prepared statement "dblock_/ { pending = 1; next }
    pending && /STATEMENT:/ && index($0, prefix) { n++ }
    { pending = 0 }
    END { print n + 0 }' "$server_log"
}
errors_before=$(name_errors)

assert_status "init through transaction pooling" 0 db init

# One run: its command ran and its history row is there (read directly from the server).
k=$(key one)
out=$(db run "$k" -- echo ran); rc=$?
assert_eq "a lease run through transaction pooling exits 0" 0 "$rc"
assert_eq "its command ran" ran "$out"
assert_eq "its history row is there" 1 "$(DBLOCK_DSN=$direct history_field "$k" runs.#)"

# Runs that overlap in time on one key: each command runs, never two at once (a directory only
# one can create), and every run gets its own token. More clients than the pool has sessions,
# so their transactions share server sessions.
k=$(key race)
mkdir -p "$E2E_TMP/race"
job="mkdir '$E2E_TMP/race/in' || exit 9; sleep 0.1; rmdir '$E2E_TMP/race/in'"
race 6 "$E2E_TMP/rc" env DBLOCK_DSN="$pooled" timeout 60 dblock run "$k" -w 30s -- sh -c "$job"
for i in $(seq 6); do
  wait_for 60 test -s "$E2E_TMP/rc.$i" || fail "run $i did not end"
done
for i in $(seq 6); do assert_eq "run $i of 6 on one key exits 0 (none overlapped)" 0 "$(cat "$E2E_TMP/rc.$i" 2>/dev/null)"; done
assert_eq "six history rows" 6 "$(DBLOCK_DSN=$direct history_field "$k" runs.#)"
assert_eq "six different tokens" 6 "$(DBLOCK_DSN=$direct history_field "$k" 'runs.*.token' | tr ' ' '\n' | sort -u | wc -l)"
assert_eq "the server logged no error about dblock's prepared statements" "$errors_before" "$(name_errors)"
# Waiters queue on a session advisory lock only when served directly: behind transaction pooling
# it would stay with a server session that other clients are handed, held by nobody's waiter.
queue_lock=$(python3 -c '
import sys
h = 0xcbf29ce484222325
for b in sys.argv[1].encode() + b"\0" + b"\x02queue " + sys.argv[2].encode():
    h = ((h ^ b) * 0x100000001b3) % 2**64
print(h >> 32, h & 0xffffffff)' "$DBLOCK_TABLE_PREFIX" "$k")
assert_eq "no server session holds the key's queue lock after the waiters" 0 \
  "$(DBLOCK_DSN=$direct server_sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
     AND classid::bigint = ${queue_lock% *} AND objid::bigint = ${queue_lock#* } AND objsubid = 1")"

# doctor says which set-up this is.
out=$(db doctor -s advisory); rc=$?
assert_eq "doctor: a session strategy through transaction pooling fails (78)" 78 "$rc"
check "doctor: the FAIL line names transaction pooling" grep -q "^FAIL  pooler: transaction pooling" <<<"$out"
out=$(db doctor); rc=$?
assert_eq "doctor: lease through transaction pooling passes" 0 "$rc"
check "doctor: and still says it is transaction pooling" grep -q "^ok    pooler: transaction pooling" <<<"$out"
check "doctor: and that lease waiters poll there (NOTIFY does not pass)" \
  grep -q "^ok    pooler: transaction pooling.*lease waiters (-w) may not be woken by the server" <<<"$out"
out=$(DBLOCK_DSN=$DBLOCK_TEST_PGBOUNCER_SESSION_DSN timeout 60 dblock doctor -s advisory); rc=$?
assert_eq "doctor: a session strategy through session pooling passes" 0 "$rc"
check "doctor: it names the pooler's session mode" grep -q "^ok    pooler: a connection pooler in session mode" <<<"$out"
# PgBouncer drops the startup options (ignore_startup_parameters = options), so dblock's idle
# limits never reach the server: doctor must say so, not that dblock set them.
check "doctor: through the pooler, dblock's idle limits did not arrive" \
  grep -q "^ok    idle_timeouts: dblock's own idle limits did not arrive" <<<"$out"
out=$(DBLOCK_DSN=$direct timeout 60 dblock doctor -s advisory); rc=$?
assert_eq "doctor: a direct connection passes" 0 "$rc"
check "doctor: it says direct" grep -q "^ok    pooler: direct connection" <<<"$out"
check "doctor: directly, dblock's idle limits arrive" \
  grep -q "^ok    idle_timeouts: dblock's own idle limits arrive with every connection" <<<"$out"
finish

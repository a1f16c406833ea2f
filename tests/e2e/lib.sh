# Shared by the end-to-end scripts (tests/e2e/test_*.sh): sourced, never run.
# ctest passes DBLOCK_BIN, DBLOCK_TEST_BACKEND (sqlite|mysql|postgres), DBLOCK_TEST_STRATEGY and
# DBLOCK_SOURCE_DIR. This file sets up DBLOCK_DSN (a fresh SQLite file, or the server from
# DBLOCK_TEST_MYSQL_DSN / DBLOCK_TEST_POSTGRES_DSN), a table prefix no other run uses, and
# DBLOCK_STRATEGY; it gives check/assert helpers, a bounded wait_for, a cleanup trap that kills
# background jobs, and `finish`, which prints "N passed, N failed" and sets the exit status.
# A server backend without a DSN skips the script (exit 77), or fails it when CI=true.

set -uo pipefail

DBLOCK_SOURCE_DIR=${DBLOCK_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
DBLOCK_BIN=${DBLOCK_BIN:-$DBLOCK_SOURCE_DIR/build/dblock}
DBLOCK_TEST_BACKEND=${DBLOCK_TEST_BACKEND:-sqlite}
DBLOCK_TEST_STRATEGY=${DBLOCK_TEST_STRATEGY:-lease}

e2e_passed=0
e2e_failed=0
E2E_TMP=$(mktemp -d "${TMPDIR:-/tmp}/dblock-e2e.XXXXXX")

# Kills everything this script started in the background (and their process groups, which
# is where dblock puts its commands), then removes the temp dir.
e2e_cleanup() {
  local pid
  for pid in $(jobs -p); do
    kill -KILL "$pid" 2>/dev/null
  done
  if [ -s "$E2E_TMP/pids" ]; then
    while read -r pid; do
      kill -KILL -- "-$pid" 2>/dev/null
      kill -KILL "$pid" 2>/dev/null
    done <"$E2E_TMP/pids"
  fi
  wait 2>/dev/null
  rm -rf "$E2E_TMP"
}
trap e2e_cleanup EXIT
trap 'exit 1' INT TERM HUP

skip_or_fail() {
  if [ "${CI:-}" = true ]; then
    echo "FAIL  $1 (CI=true: server tests must not be skipped)"
    exit 1
  fi
  echo "SKIP  $1"
  exit 77
}

case "$DBLOCK_TEST_BACKEND" in
  sqlite) DBLOCK_DSN="sqlite:$E2E_TMP/dblock.db" ;;
  mysql)
    [ -n "${DBLOCK_TEST_MYSQL_DSN:-}" ] || skip_or_fail "DBLOCK_TEST_MYSQL_DSN is not set"
    DBLOCK_DSN=$DBLOCK_TEST_MYSQL_DSN
    ;;
  postgres)
    [ -n "${DBLOCK_TEST_POSTGRES_DSN:-}" ] || skip_or_fail "DBLOCK_TEST_POSTGRES_DSN is not set"
    DBLOCK_DSN=$DBLOCK_TEST_POSTGRES_DSN
    ;;
  *)
    echo "FAIL  unknown DBLOCK_TEST_BACKEND '$DBLOCK_TEST_BACKEND'"
    exit 1
    ;;
esac
[ -x "$DBLOCK_BIN" ] || { echo "FAIL  no executable dblock at $DBLOCK_BIN"; exit 1; }

# Tables of their own: runs against a shared server (and parallel ctest jobs) never collide.
DBLOCK_TABLE_PREFIX="e2e_$(date +%s)_$$_${RANDOM}_"
DBLOCK_STRATEGY=$DBLOCK_TEST_STRATEGY
export DBLOCK_DSN DBLOCK_TABLE_PREFIX DBLOCK_STRATEGY
# Nothing from the machine's or the user's configuration leaks in.
unset DBLOCK_DSN_FILE DBLOCK_CONFIG
export XDG_CONFIG_HOME="$E2E_TMP/config" XDG_STATE_HOME="$E2E_TMP/state"

is_session_strategy() { [ "$DBLOCK_STRATEGY" != lease ]; }

# `dblock` is the binary itself on PATH (not a shell function), so `dblock run ... &` leaves
# $! = dblock's own pid and a signal sent to it reaches dblock, not a subshell.
mkdir -p "$E2E_TMP/bin"
ln -s "$(cd "$(dirname "$DBLOCK_BIN")" && pwd)/$(basename "$DBLOCK_BIN")" "$E2E_TMP/bin/dblock"
export PATH="$E2E_TMP/bin:$PATH"

pass() {
  e2e_passed=$((e2e_passed + 1))
  echo "ok    $1"
}
fail() {
  e2e_failed=$((e2e_failed + 1))
  echo "FAIL  $1"
}

# check NAME COMMAND...: passes when the command succeeds.
check() {
  local name=$1
  shift
  if "$@"; then pass "$name"; else fail "$name"; fi
}

# assert_eq NAME EXPECTED ACTUAL
assert_eq() {
  if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: expected '$2', got '$3'"; fi
}

# assert_status NAME EXPECTED COMMAND...: runs the command, compares its exit status.
assert_status() {
  local name=$1 expected=$2 status=0
  shift 2
  "$@" || status=$?
  assert_eq "$name (exit status)" "$expected" "$status"
}

# assert_between NAME LOW HIGH VALUE: LOW <= VALUE <= HIGH (integers; generous windows only).
assert_between() {
  if [ "$4" -ge "$2" ] && [ "$4" -le "$3" ]; then pass "$1"; else fail "$1: $4 not within [$2, $3]"; fi
}

# wait_for SECONDS COMMAND...: polls every 0.1 s until the command succeeds; false on timeout.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}

# Milliseconds on the monotonic clock, for timing windows.
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# remember_pid PID: the cleanup trap kills its process group too (a dblock's command).
remember_pid() { echo "$1" >>"$E2E_TMP/pids"; }

is_held() { dblock status -q "$1" >/dev/null 2>&1; }
is_free() {
  local s=0
  dblock status -q "$1" >/dev/null 2>&1 || s=$?
  [ "$s" -eq 1 ]
}

# A key unique to this script and test, so scripts sharing a server never meet.
key() { echo "e2e-$$-$1"; }

finish() {
  echo "$e2e_passed passed, $e2e_failed failed"
  if [ "$e2e_failed" -eq 0 ] && [ "$e2e_passed" -gt 0 ]; then exit 0; else exit 1; fi
}

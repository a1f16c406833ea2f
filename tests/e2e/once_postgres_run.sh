#!/usr/bin/env bash
# `dblock run` against PostgreSQL: a holder session killed with pg_terminate_backend makes run
# terminate the command and exit 76, and the next token is still larger; server idle killers
# of 1 s do not drop a held session lock over 3 s; a waiter on a lease starts within a
# fraction of a second of the release (LISTEN/NOTIFY). Needs DBLOCK_TEST_POSTGRES_DSN and psql;
# without them: skipped (77), or a failure when CI=true.
set -uo pipefail

source_dir=${DBLOCK_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bin=${DBLOCK_BIN:-$source_dir/build/dblock}
dsn=${DBLOCK_TEST_POSTGRES_DSN:-}
skip() {
  echo "skipped: $1"
  if [ "${CI:-}" = true ]; then exit 1; else exit 77; fi
}
[ -n "$dsn" ] || skip "DBLOCK_TEST_POSTGRES_DSN is not set"
command -v psql >/dev/null || skip "no psql to kill a holder with"

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "ok    $1"; }
fail() { failed=$((failed + 1)); echo "FAIL  $1"; }
check() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1 (expected '$2', got '$3')"; fi; }

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
prefix="e2r_$(date +%s)_$$_"
export DBLOCK_DSN="$dsn" DBLOCK_TABLE_PREFIX="$prefix"
sql() { timeout 10 psql "$dsn" -XAtq -v ON_ERROR_STOP=1 -c "$1"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# Waits (bounded) until `status -q KEY` says held.
wait_held() {
  for _ in $(seq 1 100); do
    timeout 10 "$bin" status -q "$1" && return 0
    sleep 0.1
  done
  return 1
}

timeout 30 "$bin" run probe -- true
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "FAIL  'dblock run probe -- true' exits $rc: no working run in this build"
  exit 1
fi

for strategy in advisory for-update txn-insert; do
  key="killed-$strategy"
  timeout 60 "$bin" -s "$strategy" run "$key" --ttl 9s --kill-after 1s -- \
    sh -c 'echo "$DBLOCK_TOKEN" >"$0/token1"; sleep 30; echo survived >"$0/survived"' "$tmp" &
  holder=$!
  pids+=("$holder")
  if ! wait_held "$key"; then
    fail "$strategy: the holder never showed as held"
    continue
  fi
  killed=$(sql "SELECT count(pg_terminate_backend(session_id::int)) FROM \"${prefix}locks\" WHERE name = '$key'")
  check "$strategy: holder session terminated" 1 "$killed"
  start=$(now_ms)
  wait "$holder"
  rc=$?
  took=$(($(now_ms) - start))
  check "$strategy: run exits 76 after its session was killed" 76 "$rc"
  [ "$took" -lt 8000 ] && pass "$strategy: noticed within ${took} ms (ttl 9s)" || fail "$strategy: took ${took} ms"
  [ -e "$tmp/survived" ] && fail "$strategy: the command survived" || pass "$strategy: the command was terminated"
  rm -f "$tmp/survived"
  timeout 10 "$bin" status -q "$key"
  check "$strategy: the key is free afterwards" 1 "$?"
  token2=$(timeout 30 "$bin" -s "$strategy" run "$key" -- sh -c 'echo "$DBLOCK_TOKEN"')
  token1=$(cat "$tmp/token1")
  [ "$token2" -gt "$token1" ] && pass "$strategy: next token $token2 > $token1" || fail "$strategy: token $token2 after $token1"

  # Idle killers of 1 s on the server: the held session must survive 3 s idle.
  idle_dsn="$dsn$(case $dsn in *\?*) echo '&' ;; *) echo '?' ;; esac)options=-c%20idle_session_timeout%3D1000%20-c%20idle_in_transaction_session_timeout%3D1000"
  DBLOCK_DSN="$idle_dsn" timeout 60 "$bin" -s "$strategy" run "idle-$strategy" -- sleep 3
  check "$strategy: a 3 s command under 1 s idle killers exits 0" 0 "$?"
done

# Lease waiter wakes at once on release (LISTEN/NOTIFY), not at its next backoff.
timeout 60 "$bin" run wake -- sh -c 'sleep 1.5; date +%s%N >"$0/released"' "$tmp" &
pids+=("$!")
wait_held wake || fail "lease: holder never held"
# (a script file, not sh -c: the command's own -c must not meet dblock's option parser)
printf '#!/bin/sh\ndate +%%s%%N >"%s/started"\n' "$tmp" >"$tmp/start.sh"
chmod +x "$tmp/start.sh"
timeout 60 "$bin" run wake --wait=20s -- "$tmp/start.sh"
check "lease: the waiter ran" 0 "$?"
wait
if [ -s "$tmp/started" ] && [ -s "$tmp/released" ]; then
  gap=$(( ($(cat "$tmp/started") - $(cat "$tmp/released")) / 1000000 ))
else
  gap=999999
fi
[ "$gap" -ge 0 ] && [ "$gap" -lt 400 ] && pass "lease: waiter started ${gap} ms after the command ended" ||
  fail "lease: waiter started ${gap} ms after the command ended (wakeup missed?)"

if [ "$failed" -eq 0 ]; then
  echo "$passed passed"
  exit 0
fi
echo "$passed passed, $failed failed"
exit 1

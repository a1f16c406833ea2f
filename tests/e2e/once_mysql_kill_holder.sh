#!/usr/bin/env bash
# For every strategy on MySQL: a `run` whose lock is taken away (release --force ends a
# session holder's connection with KILL CONNECTION; a lease is taken over) exits 76 within
# the heartbeat window, and the next holder's fencing token is greater.
# Needs DBLOCK_TEST_MYSQL_DSN (scripts/test-servers.sh).
set -u
DBLOCK_BIN=${DBLOCK_BIN:?DBLOCK_BIN is not set}
dsn=${DBLOCK_TEST_MYSQL_DSN:-}
if [[ -z $dsn ]]; then
  echo "DBLOCK_TEST_MYSQL_DSN is not set: skipped" >&2
  [[ ${CI:-} == true ]] && exit 1
  exit 77
fi
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
prefix="e2e$RANDOM$$_"
db() { timeout 20 "$DBLOCK_BIN" -d "$dsn" --table-prefix "$prefix" "$@"; }

# Until the run engine is linked in, `run` exits 70 without a word: skip rather than fail.
db run "probe-$RANDOM" -- true 2>"$tmp/probe"
probe=$?
if [[ $probe == 70 && ! -s $tmp/probe ]]; then
  echo "dblock run is not available in this build: skipped" >&2
  exit 77
fi
[[ $probe == 0 ]] || fail "a trivial run exited $probe: $(cat "$tmp/probe")"

for strategy in lease advisory for-update txn-insert; do
  key="kill-$strategy-$RANDOM"
  db -s "$strategy" run "$key" --ttl 9s --kill-after 1s -- sh -c 'echo "$DBLOCK_TOKEN" > "$0"; exec sleep 60' \
    "$tmp/token.$strategy" 2>"$tmp/err.$strategy" &
  holder=$!
  pids+=("$holder")
  held=no
  for _ in $(seq 1 100); do
    if [[ -s $tmp/token.$strategy ]] && db status -q "$key"; then held=yes; break; fi
    sleep 0.1
  done
  [[ $held == yes ]] || { fail "$strategy: the run never held $key"; continue; }
  first=$(cat "$tmp/token.$strategy")

  start=$SECONDS
  db release "$key" --force || fail "$strategy: release --force failed"
  # A lease is only lost once someone else takes it; session locks are gone with the session.
  [[ $strategy == lease ]] && { db acquire "$key" --ttl 60s --owner thief >/dev/null || fail "lease: thief could not acquire"; }
  rc=
  for _ in $(seq 1 200); do
    if ! kill -0 "$holder" 2>/dev/null; then wait "$holder"; rc=$?; break; fi
    sleep 0.1
  done
  [[ -n $rc ]] || { fail "$strategy: run still going 20 s after its lock was taken"; kill "$holder"; continue; }
  [[ $rc == 76 ]] || fail "$strategy: run exited $rc, expected 76 ($(cat "$tmp/err.$strategy"))"
  (( SECONDS - start <= 12 )) || fail "$strategy: took $((SECONDS - start)) s to notice the loss"

  if [[ $strategy == lease ]]; then
    db release "$key" --owner thief || fail "lease: thief could not release"
  fi
  next=$(db -s "$strategy" run "$key" -- sh -c 'echo "$DBLOCK_TOKEN"') || fail "$strategy: run after the loss failed"
  [[ $next =~ ^[0-9]+$ ]] && (( next > first )) || fail "$strategy: token '$next' is not greater than $first"
done

exit $((failures > 0))

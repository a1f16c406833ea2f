#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs missing packages, builds with warnings as
# errors, starts throwaway MariaDB and PostgreSQL servers, runs every test against SQLite,
# MariaDB and PostgreSQL, stops the servers. Exits non-zero on any failure.
#   scripts/test.sh              everything
#   scripts/test.sh -R sqlite    extra arguments go to ctest
#   scripts/test.sh --soak 1h    only the adversary farm (tests/adversary), for that long,
#                                going on after a breach; for before a release
# The failover tests (label cluster) start clusters of their own (scripts/test-cluster.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh --check 2>/dev/null || scripts/install-deps.sh

build=${DBLOCK_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DDBLOCK_WERROR=ON -DDBLOCK_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build"

if [ "${1:-}" = --soak ]; then
  [ $# -eq 2 ] || { echo "usage: scripts/test.sh --soak DURATION (e.g. 1h)" >&2; exit 64; }
  # The farm starts servers of its own; it prints its seeds, every breach and a summary.
  exec python3 tests/adversary/adversary.py --soak --budget "$2" --corpus tests/adversary/corpus --fresh \
    --dblock "$build/dblock" --previous "$build/previous/dblock"
fi

trap 'scripts/test-servers.sh stop' EXIT
# Not `eval "$(... start)"`: eval of an empty string succeeds, so a failed start would go on
# to fail every server test with "DSN not set". test-servers.sh prints the server's log on
# stderr when it fails.
if ! servers=$(scripts/test-servers.sh start); then
  echo "test.sh: the test servers did not start (their log is above); no tests were run" >&2
  exit 1
fi
eval "$servers"

# The output of the tests that failed, again: a CI log is often read from its tail, and with
# two tests at a time a failure's lines sit far up among the others' progress.
print_failed() {
  local dir="$build/Testing/Temporary" name out
  [ -s "$dir/LastTestsFailed.log" ] || return 0
  echo "=== the failed tests' output: their failures, then their last lines (all of it is above) ==="
  while IFS=: read -r _ name; do
    out=$(awk -v t="$name" '$2 == "Test:" && $3 == t { on = 1; next }
      on && /^Output:/ { out = 1; next } out && /^<end of output>/ { exit }
      out && !/^-+$/ && !/^ok / { print }' "$dir/LastTest.log")
    echo "--- $name"
    grep -E 'FAIL|ERROR' <<<"$out" | head -n 20
    echo "..."
    tail -n 40 <<<"$out"
  done <"$dir/LastTestsFailed.log"
}

# Tests that need a server fail instead of skipping when it is missing.
export CI=${CI:-true}
# A failure here still runs the sanitizer build below, so that one run of the suite reports both;
# the exit status is the first failure's.
status=0
ctest --test-dir "$build" --output-on-failure --no-tests=error -j "${DBLOCK_TEST_JOBS:-2}" "$@" || {
  status=$?
  print_failed
}

# The same code under AddressSanitizer and UBSan: unit tests and every backend's conformance
# suite (the end-to-end scripts time processes, which sanitizers slow down too much to be fair).
if [ "${DBLOCK_SANITIZE_BUILD:-1}" = 1 ] && [ $# -eq 0 ]; then
  cmake -S . -B "$build-asan" -G Ninja -DDBLOCK_WERROR=ON -DDBLOCK_BUILD_TESTS=ON -DDBLOCK_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
  ninja -C "$build-asan" dblock_unit_tests dblock_backend_unit_tests dblock_conformance
  ctest --test-dir "$build-asan" --output-on-failure --no-tests=error -R '^(unit|conformance\.)' -j 2 || {
    asan=$?
    [ "$status" -ne 0 ] || status=$asan
  }
fi
exit "$status"

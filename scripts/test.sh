#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs missing packages, builds with warnings as
# errors, starts throwaway MariaDB and PostgreSQL servers, runs every test against SQLite,
# MariaDB and PostgreSQL, stops the servers. Exits non-zero on any failure.
#   scripts/test.sh              everything
#   scripts/test.sh -R sqlite    extra arguments go to ctest
# The failover tests (label cluster) start clusters of their own (scripts/test-cluster.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh --check 2>/dev/null || scripts/install-deps.sh

build=${DBLOCK_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DDBLOCK_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build"

trap 'scripts/test-servers.sh stop' EXIT
# Not `eval "$(... start)"`: eval of an empty string succeeds, so a failed start would go on
# to fail every server test with "DSN not set". test-servers.sh prints the server's log on
# stderr when it fails.
if ! servers=$(scripts/test-servers.sh start); then
  echo "test.sh: the test servers did not start (their log is above); no tests were run" >&2
  exit 1
fi
eval "$servers"

# Tests that need a server fail instead of skipping when it is missing.
export CI=${CI:-true}
ctest --test-dir "$build" --output-on-failure --no-tests=error -j "${DBLOCK_TEST_JOBS:-2}" "$@"

# The same code under AddressSanitizer and UBSan: unit tests and every backend's conformance
# suite (the end-to-end scripts time processes, which sanitizers slow down too much to be fair).
if [ "${DBLOCK_SANITIZE_BUILD:-1}" = 1 ] && [ $# -eq 0 ]; then
  cmake -S . -B "$build-asan" -G Ninja -DDBLOCK_WERROR=ON -DDBLOCK_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
  ninja -C "$build-asan" dblock_unit_tests dblock_backend_unit_tests dblock_conformance
  ctest --test-dir "$build-asan" --output-on-failure --no-tests=error -R '^(unit|conformance\.)' -j 2
fi

#!/usr/bin/env bash
# A condition given to wait_for (tests/e2e/lib.sh) as plain words is expanded once, when
# wait_for is called: `wait_for 10 test "$(grep -c . log)" -ge 2` counts the log before the
# loop and then retries that one count until the deadline, so anything written a moment later
# fails the test (e2e.postgres_row_lock_distance did, 4 runs in 37). A condition that reads
# something must be re-read on each try: `wait_for 10 eval '[ "$(...)" -ge 2 ]'`, or a function.
set -u
top=${1:-${DBLOCK_SOURCE_DIR:?usage: wait_for_once.sh SOURCE_DIR}}
found=$(grep -rnE 'wait_for +[0-9.]+ +(test|\[\[?) [^|;]*\$\(' "$top/tests" --include='*.sh' | grep -v '/tests/lint/')
if [ -n "$found" ]; then
  echo "a wait_for condition whose \$(...) is expanded once, before the loop (use eval '...' or a function):"
  echo "$found"
  exit 1
fi
echo "no wait_for condition is expanded once"

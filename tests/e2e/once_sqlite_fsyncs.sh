#!/usr/bin/env bash
# SQLite durability at minimum cost (man/dblock.1, SQLite durability): a `run` on an existing
# database issues one fsync-class call, the acquisition's commit (the release, which also writes
# and trims the history, commits without one), and a run on a new file at most five. Counted
# with strace, so this is a count, not a timing; once_sqlite_power_loss.sh checks what a power
# loss after that one fsync leaves.
source "$(dirname "$0")/lib.sh"

command -v strace >/dev/null || skip_or_fail "strace is needed to count fsyncs (scripts/install-deps.sh)"
strace -f -o /dev/null true 2>/dev/null || skip_or_fail "strace cannot trace here (ptrace not permitted)"

db="$E2E_TMP/fsyncs.db"
# The fsync-class calls of one command, every thread and child included.
fsyncs_of() {
  local trace="$E2E_TMP/trace"
  strace -f -qq -o "$trace" -e trace=fsync,fdatasync,sync_file_range,msync "$@" >/dev/null 2>&1
  local rc=$?
  [ "$rc" -eq 0 ] || { echo "command failed with $rc" >&2; echo 99; return; }
  grep -cE '^[0-9]+ +(fsync|fdatasync|sync_file_range|msync)\(' "$trace"
}

first=$(fsyncs_of dblock --dsn "sqlite:$db" run k -- true)
echo "    first run on a new file: $first fsync-class calls"
check "a run on a new file (schema created on demand) issues at most 5 fsyncs" test "$first" -le 5

for i in 1 2 3; do
  steady=$(fsyncs_of dblock --dsn "sqlite:$db" run k -- true)
  echo "    run $((i + 1)): $steady fsync-class calls"
  check "run $((i + 1)) on an existing database issues one fsync (the acquisition's)" test "$steady" -eq 1
done

out=$(dblock --dsn "sqlite:$db" history k --json)
assert_eq "every run left its history row" 4 "$(grep -o '"token"' <<<"$out" | wc -l)"

finish

#!/usr/bin/env bash
# A MariaDB lease run's release, its run's history row and the history trim are one block of
# statements in one transaction (dblock(1), NOTES, Round trips; docs/backend-contract.md,
# "MariaDB's blocks"): a history row the server refuses leaves the release undone as well (the
# key still held, by the run's token, until its TTL), never a key released without its run's
# row. A trigger on <prefix>runs that refuses every insert stands in for any such error. A
# session strategy's history row (a block of its own) refused leaves no row either, its lock
# given back all the same.
source "$(dirname "$0")/lib.sh"

k=$(key atomic)
assert_status "a first run makes the tables and the key's row" 0 dblock run "$k" -- true
token=$(dblock status --json "$k" | json_field locks.0.token)
trigger="${DBLOCK_TABLE_PREFIX}no_history"
server_sql "CREATE TRIGGER \`$trigger\` BEFORE INSERT ON \`${DBLOCK_TABLE_PREFIX}runs\` FOR EACH ROW
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'no history here'" || fail "the trigger was not made"

# The command ran and succeeded: the run exits with its status, the release's failure said.
assert_status "a run whose history row is refused: its command's status" 0 \
  sh -c 'dblock run --ttl 60 "$0" -- true 2>"$1"' "$k" "$E2E_TMP/err"
sed 's/^/    | /' "$E2E_TMP/err"
check "it says the release failed, and why" grep -q "could not release.*no history here" "$E2E_TMP/err"
check "its release was rolled back with the row: the key is still held" is_held "$k"
assert_eq "by the run's token" $((token + 1)) "$(dblock status --json "$k" | json_field locks.0.token)"
assert_eq "the history has the first run's row only" 1 "$(dblock history --json "$k" | json_field runs.#)"

# The advisory lock goes with its session whatever the history row does.
a=$(key atomic-advisory)
dblock -s advisory run "$a" -- true 2>"$E2E_TMP/err.a"
check "an advisory run whose history row is refused says so" grep -q "no history here" "$E2E_TMP/err.a"
assert_eq "no history row of it" 0 "$(dblock history --json "$a" | json_field runs.#)"
check "its key is free" is_free "$a"

server_sql "DROP TRIGGER \`$trigger\`" || fail "the trigger was not dropped"
assert_status "release --force frees the key" 0 dblock release --force "$k"
assert_status "the next run runs and records" 0 dblock run "$k" -- true
assert_eq "its row is the history's second" 2 "$(dblock history --json "$k" | json_field runs.#)"
finish

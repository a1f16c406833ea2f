#!/usr/bin/env bash
# `status` of 70,000 keys on MariaDB: more than a statement's 65,535 placeholders, so the keys
# go in batches (as SQLite takes them one at a time). Every key is reported, in the order
# given, the held one held and the others free.
source "$(dirname "$0")/lib.sh"

held=$(key held)
check "a key is taken" dblock run "$held" -- true
dblock run "$held" -- sleep 30 &
holder=$!
remember_pid $holder
check "the key is held" wait_for 10 is_held "$held"
seq -f "$(key many)-%g" 1 70000 >"$E2E_TMP/keys"
echo "$held" >>"$E2E_TMP/keys"
rc=0
xargs -a "$E2E_TMP/keys" -s 2000000 -x "$DBLOCK_BIN" status --json >"$E2E_TMP/status.json" 2>"$E2E_TMP/err" || rc=$?
assert_eq "status of 70,001 keys does not fail (exit 0: one is held)" 0 "$rc"
[ "$rc" = 0 ] || head -c 300 "$E2E_TMP/err"
out=$(python3 -c '
import json, sys
locks = json.load(open(sys.argv[1]))["locks"]
print(len(locks), locks[0]["key"].endswith("-1"), locks[-1]["key"] == sys.argv[2], locks[-1]["state"],
      sum(l["state"] == "free" for l in locks))' "$E2E_TMP/status.json" "$held" 2>&1)
assert_eq "every key reported, in order; the last one held, the rest free" "70001 True True held 70000" "$out"
finish

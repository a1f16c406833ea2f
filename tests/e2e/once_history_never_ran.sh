#!/usr/bin/env bash
# history of a key that never ran (and of a lock database where nothing ran) answers as status
# does: the header (none with -n), in --json an empty list of runs, exit 0. status of a
# database with no locks prints its header too.
source "$(dirname "$0")/lib.sh"

assert_status "init" 0 dblock -q init
never=$(key never)
out=$(dblock history "$never")
assert_eq "history of a key that never ran exits 0" 0 $?
assert_eq "it prints the header, and only that" "STARTED KEY HOST PID OWNER TOKEN DURATION OUTCOME EXIT" "$out"
assert_eq "history -o KEY,EXIT: the header of those columns" "KEY EXIT" "$(dblock history -o KEY,EXIT "$never")"
out=$(dblock history -n "$never")
assert_eq "history -n: nothing, exit 0" "0:" "$?:$out"
out=$(dblock history --json "$never")
assert_eq "history --json exits 0" 0 $?
assert_eq "history --json: an empty list of runs" "[]" "$(python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["runs"]))' <<<"$out")"
assert_eq "history of a database where nothing ran: the header" \
  "STARTED KEY HOST PID OWNER TOKEN DURATION OUTCOME EXIT" "$(dblock history)"
out=$(dblock status)
assert_eq "status of a database with no locks exits 0" 0 $?
check "and prints its header ($out)" grep -q "^KEY .*STATE" <<<"$out"

# Once it ran, the run is listed under the same header.
assert_status "a run" 0 dblock run "$never" -- true
assert_eq "then history lists it" 2 "$(dblock history "$never" | wc -l)"
finish

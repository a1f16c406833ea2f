#!/usr/bin/env bash
# The oracle must be able to fail: a log with an overlap, with a token out of order and with a
# missing run is refused; an honest log is accepted.
source "$(dirname "$0")/lib.sh"

log=$E2E_TMP/log
printf 'start 1 1000000000 1\nend 1 2000000000 1 done\nstart 2 3000000000 2\nend 2 4000000000 2 done\n' >"$log"
check "an honest log passes" python3 "$ORACLE" check "$log" 2
check "a missing run is found" bash -c "! python3 '$ORACLE' check '$log' 3 >/dev/null"
printf 'start 1 1000000000 1\nstart 2 1500000000 2\nend 1 2000000000 1 done\nend 2 4000000000 2 done\n' >"$log"
check "an overlap is found" bash -c "! python3 '$ORACLE' check '$log' 2 >/dev/null"
printf 'start 2 1000000000 1\nend 2 2000000000 1 done\nstart 1 3000000000 2\nend 1 4000000000 2 done\n' >"$log"
check "a token out of order is found" bash -c "! python3 '$ORACLE' check '$log' 2 >/dev/null"
printf 'start 1 1000000000 1\nstart 2 3000000000 2\nend 2 4000000000 2 done\n' >"$log"
check "a run that never ended overlaps the next" bash -c "! python3 '$ORACLE' check '$log' 2 >/dev/null"

# Two real runs, one after the other, through the oracle job.
dblock run "$(key a)" -- "$ORACLE_JOB" "$log.real" 0.2 && dblock run "$(key a)" -- "$ORACLE_JOB" "$log.real" 0.2
oracle_check "two real runs" "$log.real" 2
finish

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

# A semaphore's tokens (two slots): a run's acquisition, not its command's start, is what a
# later token must follow. 64 was taken before 66 but its command started late, after 66's had
# ended: honest. 65 taken after 66's command ended: a token out of order.
sem_log() {
  printf 'start 66 1700000010000000000 1 1\nend 66 1700000010300000000 1 done\n'
  printf 'start 64 1700000010500000000 2 0\nend 64 1700000011000000000 2 done\n'
  printf 'start %s 1700000011500000000 3 1\nend %s 1700000012000000000 3 done\n' "$1" "$1"
}
sem_history() {
  printf '{"runs": [{"token": 64, "started_at": "2023-11-14T22:13:29.900Z"},'
  printf ' {"token": 66, "started_at": "2023-11-14T22:13:29.950Z"}'
  [ -z "$2" ] || printf ', {"token": %s, "started_at": "2023-11-14T22:13:31.400Z"}' "$1"
  printf ']}\n'
}
sem_log 67 >"$log" && sem_history 67 with >"$log.json"
check "a semaphore's command that started late passes" python3 "$ORACLE" tokens "$log" 3 "$log.json"
sem_log 65 >"$log" && sem_history 65 with >"$log.json"
check "a semaphore token taken after an end and smaller is found" bash -c "! python3 '$ORACLE' tokens '$log' 3 '$log.json' >/dev/null"
sem_log 67 >"$log" && sem_history 67 "" >"$log.json" && sed -i 's/, {"token": 66[^}]*}//' "$log.json"
check "a history missing most runs is refused" bash -c "! python3 '$ORACLE' tokens '$log' 3 '$log.json' >/dev/null"

# Two real runs, one after the other, through the oracle job.
dblock run "$(key a)" -- "$ORACLE_JOB" "$log.real" 0.2 && dblock run "$(key a)" -- "$ORACLE_JOB" "$log.real" 0.2
oracle_check "two real runs" "$log.real" 2
finish

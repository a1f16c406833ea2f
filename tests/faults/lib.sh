# Shared by the fault-injection scripts (tests/faults/fault_*.sh): sourced, never run.
# Builds on tests/e2e/lib.sh (DSN per cell, a private table prefix, check/assert helpers,
# cleanup of background jobs, `finish`) and adds the independent oracle:
#
#   every run's command is `$ORACLE_JOB LOG SECONDS`, which appends to LOG
#     start TOKEN NS PID        when it starts (NS: wall clock in ns, never faked)
#     end   TOKEN NS PID how    when it ends (how: done | term)
#   a test that kills a job with SIGKILL appends the end itself, with `oracle_end`,
#   at the moment it has seen the job's whole process group dead.
#   `oracle_check NAME LOG EXPECTED` then checks: no two [start, end] intervals intersect,
#   tokens strictly increase in start order, and exactly EXPECTED runs happened.
#   A start without an end counts as running until the check: it overlaps every later start.

source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"

FAULTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ORACLE_JOB=$FAULTS_DIR/oracle_job.sh
ORACLE=$FAULTS_DIR/oracle.py

# oracle_end LOG TOKEN: the job with TOKEN is dead now (it could not log that itself).
oracle_end() { echo "end $2 $(date +%s%N) 0 killed" >>"$1"; }

# oracle_check NAME LOG EXPECTED_RUNS [ALLOWED_MS]: passes when the log shows no overlap, tokens that
# strictly increase in start order and EXPECTED_RUNS starts; prints the smallest gap between
# one run's end and the next run's start (negative = overlap, in ms).
oracle_check() {
  local out
  if out=$(python3 "$ORACLE" check "$2" "$3" ${4:-} 2>&1); then
    pass "$1: $out"
  else
    fail "$1: $out"
  fi
}

# group_alive PGID: true while any process of the group exists and is not a zombie.
group_alive() {
  local pg=$1 f line st ppid pgrp
  for f in /proc/[0-9]*/stat; do
    read -r line <"$f" 2>/dev/null || continue
    # After the command name's closing parenthesis: state, ppid, pgrp.
    read -r st ppid pgrp _ <<<"${line##*) }"
    [ "$pgrp" = "$pg" ] && [ "$st" != Z ] && return 0
  done
  return 1
}

# pids_alive PID...: true while any of them exists and is not a zombie.
pids_alive() {
  local pid line st
  for pid in "$@"; do
    read -r line <"/proc/$pid/stat" 2>/dev/null || continue
    read -r st _ <<<"${line##*) }"
    [ "$st" != Z ] && return 0
  done
  return 1
}

# server_sql SQL: runs one statement on the cell's server as the test user, prints rows
# tab-separated (the password travels in the environment, never on a command line).
server_sql() {
  case "$DBLOCK_TEST_BACKEND" in
    mysql)
      local rest=${DBLOCK_DSN#*://} userinfo hostport db
      userinfo=${rest%%@*}
      rest=${rest#*@}
      hostport=${rest%%/*}
      db=${rest#*/}
      db=${db%%\?*}
      MYSQL_PWD=${userinfo#*:} timeout 10 mariadb --protocol=tcp -h "${hostport%%:*}" -P "${hostport#*:}" \
        -u "${userinfo%%:*}" -D "$db" -N -B -e "$1"
      ;;
    postgres) timeout 10 psql "$DBLOCK_DSN" -X -q -A -t -F $'\t' -v ON_ERROR_STOP=1 -c "$1" ;;
    *) echo "server_sql: no server for $DBLOCK_TEST_BACKEND" >&2; return 1 ;;
  esac
}

# kill_holder_session KEY: the server ends the session that holds KEY (KILL CONNECTION,
# pg_terminate_backend), as an administrator or a server-side idle killer would.
kill_holder_session() {
  local id
  id=$(server_sql "SELECT session_id FROM ${DBLOCK_TABLE_PREFIX}locks WHERE name = '$1'") || return 1
  [ -n "$id" ] || return 1
  case "$DBLOCK_TEST_BACKEND" in
    mysql) server_sql "KILL CONNECTION $id" ;;
    postgres) [ "$(server_sql "SELECT pg_terminate_backend($id)")" = t ] ;;
  esac
}

# group_members PGID: the pids of the group's live processes, one per line.
group_members() {
  local pg=$1 f line st ppid pgrp
  for f in /proc/[0-9]*/stat; do
    read -r line <"$f" 2>/dev/null || continue
    read -r st ppid pgrp _ <<<"${line##*) }"
    [ "$pgrp" = "$pg" ] && [ "$st" != Z ] && echo "${f//[^0-9]/}"
  done
  return 0
}

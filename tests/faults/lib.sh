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

# oracle_check NAME LOG EXPECTED_RUNS: passes when the log shows no overlap, tokens that
# strictly increase in start order and EXPECTED_RUNS starts; prints the smallest gap between
# one run's end and the next run's start (negative = overlap, in ms).
oracle_check() {
  local out
  if out=$(python3 "$ORACLE" check "$2" "$3" 2>&1); then
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

# The freezable proxy (proxy.py says what freeze means). One or more per script; each is a
# background job of the script, so the cleanup trap kills it by pid, and it exits by itself
# after PROXY_LIFETIME seconds in any case.
PROXY=$FAULTS_DIR/proxy.py
PROXY_LIFETIME=${PROXY_LIFETIME:-240}
declare -A PROXY_STATE=()

# proxy_start TARGET_PORT: a proxy from a free 127.0.0.1 port to 127.0.0.1:TARGET_PORT;
# sets PROXY_PORT and PROXY_PID. Call it directly (not in $(...)), so it stays this shell's job.
proxy_start() {
  local base=$E2E_TMP/proxy.${#PROXY_STATE[@]}
  python3 "$PROXY" --target-port "$1" --port-file "$base.port" --state-file "$base.state" \
    --lifetime "$PROXY_LIFETIME" >/dev/null 2>>"$E2E_TMP/proxy.log" &
  PROXY_PID=$!
  remember_pid "$PROXY_PID"
  PROXY_STATE[$PROXY_PID]=$base.state
  if ! wait_for 10 test -s "$base.port"; then
    echo "FAIL  the proxy to port $1 did not start: $(cat "$E2E_TMP/proxy.log")"
    exit 1
  fi
  PROXY_PORT=$(cat "$base.port")
}

# proxy_state [PID]: the proxy's state line (`running|frozen NS accepted=N open=M`).
proxy_state() { cat "${PROXY_STATE[${1:-$PROXY_PID}]}" 2>/dev/null; }

proxy_is() { [ "$(proxy_state "${2:-$PROXY_PID}" | cut -d' ' -f1)" = "$1" ]; }

# proxy_freeze [PID] / proxy_thaw [PID]: returns once the proxy confirmed the new state.
proxy_freeze() {
  kill -USR1 "${1:-$PROXY_PID}" && wait_for 10 proxy_is frozen "${1:-$PROXY_PID}"
}
proxy_thaw() {
  kill -USR2 "${1:-$PROXY_PID}" && wait_for 10 proxy_is running "${1:-$PROXY_PID}"
}
# proxy_reset [PID]: every open connection through it is aborted with a RST.
proxy_reset() { kill -HUP "${1:-$PROXY_PID}"; }

# proxy_since_ms [PID]: wall clock in ms at which the proxy's current state took effect.
proxy_since_ms() { echo $(($(proxy_state "${1:-$PROXY_PID}" | cut -d' ' -f2) / 1000000)); }

# dsn_port DSN: the port of a URL-style DSN whose host is 127.0.0.1 (anything else is refused,
# so a proxied test can never be pointed off this machine).
dsn_port() {
  local re='^[a-z]+://([^@/]*@)?127\.0\.0\.1:([0-9]+)(/|$)'
  [[ $1 =~ $re ]] || { echo "dsn_port: not a 127.0.0.1:PORT DSN" >&2; return 1; }
  echo "${BASH_REMATCH[2]}"
}

# proxy_dsn DSN PORT: the same DSN, pointed at 127.0.0.1:PORT (a proxy) instead.
proxy_dsn() {
  dsn_port "$1" >/dev/null || return 1
  echo "$1" | sed -E "s#^([a-z]+://([^@/]*@)?)127\.0\.0\.1:[0-9]+#\\1127.0.0.1:$2#"
}

# pid_ended PID: the process is gone or a zombie.
pid_ended() { [ ! -e "/proc/$1" ] || ! pids_alive "$1"; }

# job_status VAR SECONDS PID: waits up to SECONDS for the background job PID of this shell and
# sets VAR to its exit status, or to "timeout" while it still runs (not in $(...): a subshell
# cannot reap this shell's jobs).
job_status() {
  local s=timeout
  if wait_for "$2" pid_ended "$3"; then
    s=0
    wait "$3" || s=$?
  fi
  printf -v "$1" '%s' "$s"
}

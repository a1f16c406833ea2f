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
    { read -r line <"$f"; } 2>/dev/null || continue
    # After the command name's closing parenthesis: state, ppid, pgrp.
    read -r st ppid pgrp _ <<<"${line##*) }"
    [ "$pgrp" = "$pg" ] && [ "$st" != Z ] && return 0
  done
  return 1
}

# process_ids PID...: "PID:START" for each that is alive, START its start time (/proc/PID/stat's
# 22nd field): a process's identity where a pid alone may be another's by the time it is looked
# at again (a loaded machine that starts thousands of processes wraps pid_max, 32768 here, in
# seconds). pids_alive, watch_death and start_competitor take either form.
process_ids() {
  local pid line f
  for pid in "$@"; do
    { read -r line <"/proc/$pid/stat"; } 2>/dev/null || continue
    read -r -a f <<<"${line##*) }"
    [ "${f[0]}" != Z ] && echo "$pid:${f[19]}"
  done
}

# pids_alive PID[:START]...: true while any of them exists (the same process: its START) and is
# not a zombie.
pids_alive() {
  local id line f
  for id in "$@"; do
    { read -r line <"/proc/${id%%:*}/stat"; } 2>/dev/null || continue
    read -r -a f <<<"${line##*) }"
    [[ $id == *:* && ${f[19]} != "${id#*:}" ]] && continue
    [ "${f[0]}" != Z ] && return 0
  done
  return 1
}

# kill_holder_session KEY: the server ends the session that holds KEY (KILL CONNECTION,
# pg_terminate_backend), as an administrator or a server-side idle killer would.
kill_holder_session() {
  local id
  id=$(server_sql "SELECT session_id FROM ${DBLOCK_TABLE_PREFIX}locks WHERE name = '$1'") || return 1
  id=${id%%:*}  # MySQL for-update, txn-insert: "<connection id>:<holder tag>"
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
    { read -r line <"$f"; } 2>/dev/null || continue
    read -r st ppid pgrp _ <<<"${line##*) }"
    [ "$pgrp" = "$pg" ] && [ "$st" != Z ] && echo "${f//[^0-9]/}"
  done
  return 0
}

# Scenarios that take the cell's server down use scripts/test-servers.sh, which finds the
# servers through its state file. server_control_required: skips (fails with CI=true) when
# the cell's server was not started by that script, since it then cannot be restarted.
SERVERS_CTL=$DBLOCK_SOURCE_DIR/scripts/test-servers.sh
SERVERS_STATE=${DBLOCK_TEST_SERVERS_STATE:-/tmp/dblock-test-servers.state}
export DBLOCK_TEST_SERVERS_STATE=$SERVERS_STATE
server_control_required() {
  local var=DBLOCK_TEST_MYSQL_DSN
  [ "$DBLOCK_TEST_BACKEND" = postgres ] && var=DBLOCK_TEST_POSTGRES_DSN
  [ -f "$SERVERS_STATE" ] ||
    skip_or_fail "no test-servers state file $SERVERS_STATE: the server cannot be restarted (export DBLOCK_TEST_SERVERS_STATE, the state file of the servers that scripts/test-servers.sh started)"
  grep -qxF "$var=$DBLOCK_DSN" "$(cat "$SERVERS_STATE")/env" 2>/dev/null ||
    skip_or_fail "$var is not the server of $SERVERS_STATE: it cannot be restarted (export DBLOCK_TEST_SERVERS_STATE, the state file of the servers that scripts/test-servers.sh started for this DSN)"
  # Whatever happens to the script, the server is up again afterwards for the next test.
  e2e_at_exit '"$SERVERS_CTL" start-server "$DBLOCK_TEST_BACKEND" >/dev/null'
}
# server_ctl VERB [ARG]: stop-server | start-server | restart SECONDS, on the cell's server.
server_ctl() { "$SERVERS_CTL" "$1" "$DBLOCK_TEST_BACKEND" "${@:2}"; }

# mark NAME: records now (ms) as the figure NAME, read back with `figure NAME`.
mark() { now_ms >"$E2E_TMP/mark.$1"; }
figure() { cat "$E2E_TMP/mark.$1"; }
# oracle_time LOG TOKEN start|end: that event's time in ms, or nothing.
oracle_time() { awk -v t="$2" -v k="$3" '$1 == k && $2 == t { print int($3 / 1000000); exit }' "$1"; }

# start_waiters N KEY LOG: N background `dblock -v run -w 60` on KEY, each running the oracle
# job for 0.3 s; their pids in ${waiter_pids[@]}, their output in $E2E_TMP/wI.out. A short
# lease, so a takeover whose reply was lost in the fault frees the row soon.
start_waiters() {
  local i
  waiter_pids=()
  for i in $(seq "$1"); do
    dblock -v run -w 60 --ttl 6s --kill-after 1s "$2" -- "$ORACLE_JOB" "$3" 0.3 >"$E2E_TMP/w$i.out" 2>&1 &
    waiter_pids+=($!)
    remember_pid "$!"
  done
}

# expect_waiters_ran WHY: every waiter of start_waiters exits 0 (its output shown otherwise).
expect_waiters_ran() {
  local i status
  for i in "${!waiter_pids[@]}"; do
    status=0
    wait "${waiter_pids[$i]}" || status=$?
    assert_eq "waiter $((i + 1)) exits 0 $1" 0 "$status"
    [ "$status" = 0 ] || sed 's/^/    /' "$E2E_TMP/w$((i + 1)).out"
  done
}

# first_start_after LOG MARK: ms from the figure MARK to the log's first start.
first_start_after() {
  local first
  first=$(awk '$1 == "start" { print int($3 / 1000000) }' "$1" | sort -n | head -n 1)
  if [ -n "$first" ]; then echo "$((first - $(figure "$2"))) ms"; else echo never; fi
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

# start_job_holder KEY LOG SECONDS [run options...]: a background `dblock run KEY` of the
# oracle job for SECONDS, stderr appended to $E2E_TMP/holder.err; sets $holder (dblock's pid)
# and $token. False if the job never started or the lock never showed as held.
start_job_holder() {
  local k=$1 log=$2 secs=$3
  shift 3
  dblock run "$k" "$@" -- "$ORACLE_JOB" "$log" "$secs" 2>>"$E2E_TMP/holder.err" &
  holder=$!
  remember_pid $holder
  wait_for 10 grep -qs '^start' "$log" && wait_for 10 is_held "$k" || return 1
  token=$(awk '$1 == "start" {print $2; exit}' "$log")
}

# watch_death OUT PID...: in the background, writes to OUT the wall-clock time (ns) at which
# the last of the PIDs is dead (gone or a zombie), looking every millisecond; gives up after
# 60 s; and to OUT.alive the time of the last look that found one alive. A SIGKILLed job ended
# between the two: OUT bounds how late (the kill's timing), OUT.alive is the end the oracle is
# given, a time the job is known to have run at, so on a loaded machine, where the watcher's
# looks come late, a late look cannot pass for an overlap, and a proven one still fails. Returns once the
# watcher is looking (OUT.ready), so a kill sent next is seen when it happens, not when a slow
# python3 start-up on a loaded machine gets round to looking.
watch_death() {
  local out=$1
  shift
  rm -f "$out.ready"
  python3 - "$out" "$@" <<'PY' &
import os, sys, time
out, pids = sys.argv[1], sys.argv[2:]
def alive(ident):
    pid, _, start = ident.partition(":")
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z" and (not start or fields[19] == start)
any(alive(p) for p in pids)
open(out + ".ready", "w").close()
deadline = time.monotonic() + 60
seen = time.time_ns()
while time.monotonic() < deadline:
    before = time.time_ns()
    if not any(alive(p) for p in pids):
        break
    seen = before
    time.sleep(0.001)
# out.alive first: a reader waits for out.
with open(out + ".alive", "w") as f:
    f.write(f"{seen}\n")
with open(out, "w") as f:
    f.write(f"{time.time_ns()}\n")
PY
  remember_pid $!
  wait_for 10 test -e "$out.ready" || fail "the death watcher did not start within 10 s"
}

# start_competitor VAR KEY PIDS_FILE ALIVE_FILE LOG: `dblock run KEY -w 30` in the background,
# whose command first appends to ALIVE_FILE every pid (PID or PID:START) of PIDS_FILE still
# alive (a job process that outlived its holder), then runs the oracle job for 0.2 s; its pid goes in VAR.
start_competitor() {
  local var=$1 cmd='
  for id in $(cat "$1"); do
    { read -r line <"/proc/${id%%:*}/stat"; } 2>/dev/null || continue
    read -r -a f <<<"${line##*) }"
    [[ $id == *:* && ${f[19]} != "${id#*:}" ]] && continue
    [ "${f[0]}" != Z ] && echo "$id" >>"$2"
  done
  shift 2; exec "$@"'
  dblock run "$2" -w 30 -- bash -c "$cmd" comp "$3" "$4" "$ORACLE_JOB" "$5" 0.2 &
  printf -v "$var" %s "$!"
  remember_pid "$!"
}

# limited_account ACCOUNT PASSWORD LIMIT: a new account of the cell's server that may hold at
# most LIMIT connections (MariaDB: MAX_USER_CONNECTIONS, errno 1226 beyond it; PostgreSQL:
# CONNECTION LIMIT, SQLSTATE 53300), with every right on dblock_test. Defines `admin SQL` (as
# the server's superuser) and `restore` (drops the account), and points DBLOCK_DSN at it. The
# test's own account, not dblock's usual superuser: superusers are exempt from both limits.
limited_account() {
  local account=$1 password=$2 limit=$3 port state_dir
  port=$(dsn_port "$DBLOCK_DSN") || return 1
  state_dir=$(cat "$SERVERS_STATE")
  if [ "$DBLOCK_TEST_BACKEND" = mysql ]; then
    eval "admin() { mariadb --socket='$state_dir/mysql/mysqld.sock' -uroot -e \"\$1\"; }"
    admin "CREATE USER '$account'@'127.0.0.1' IDENTIFIED BY '$password' WITH MAX_USER_CONNECTIONS $limit;
           GRANT ALL PRIVILEGES ON dblock_test.* TO '$account'@'127.0.0.1';" || return 1
    eval "restore() { admin \"DROP USER IF EXISTS '$account'@'127.0.0.1'\" >/dev/null 2>&1; }"
    DBLOCK_DSN="mysql://$account:$password@127.0.0.1:$port/dblock_test"
  else
    admin_dsn=$DBLOCK_DSN
    admin() { psql "$admin_dsn" -v ON_ERROR_STOP=1 -q -c "$1"; }
    admin "CREATE ROLE $account LOGIN PASSWORD '$password' CONNECTION LIMIT $limit;
           GRANT ALL ON DATABASE dblock_test TO $account; GRANT ALL ON SCHEMA public TO $account;" || return 1
    eval "restore() { admin 'DROP OWNED BY $account; DROP ROLE IF EXISTS $account' >/dev/null 2>&1; }"
    DBLOCK_DSN="postgres://$account:$password@127.0.0.1:$port/dblock_test"
  fi
  export DBLOCK_DSN
}

# running_jobs VAR LOG: sets VAR to "TOKEN PID" of each job of LOG (semaphore_job.sh's format)
# that started, did not end and is still alive, a line each. Bash's builtins alone, no process
# started: the upgrade chaos reads the log around a status, and an awk there took 0.2-0.6 s on
# a busy 2-core host whose page faults cost 20 us, as long as a job.
running_jobs() {
  local -n into=$1
  local kind token pid rest
  local -A pid_of=()
  while read -r kind token _ pid rest; do
    case $kind in
      start) pid_of[$token]=$pid ;;
      end) unset "pid_of[$token]" ;;
    esac
  done <"$2"
  into=
  for token in "${!pid_of[@]}"; do
    pids_alive "${pid_of[$token]}" && into+=${into:+$'\n'}"$token ${pid_of[$token]}"
  done
  return 0
}

# kill_running_holder LOG: SIGKILLs the dblock of one running job of LOG (running_jobs), picked
# at random, waiting up to 4 s for a job to run; true when it killed one. A job's parent is
# dblock's guard, the guard's parent dblock (both only if their names say dblock). Builtins
# alone between the read and the kill: on a busy 2-core host whose page faults cost 20 us each
# process started took longer than a job had left, and with one try per kill PostgreSQL's
# semaphore chaos cells got 0-2 kills in 45 s.
kill_running_holder() {
  local jobs running token pid guard holder name n
  for ((n = 0; n < 40; n++)); do
    running_jobs jobs "$1"
    running=()
    while read -r token pid; do
      [ -n "$pid" ] && running+=("$pid")
    done <<<"$jobs"
    if [ ${#running[@]} -gt 0 ] && parent_of guard "${running[$((RANDOM % ${#running[@]}))]}" &&
      parent_of holder "$guard"; then
      { read -r name <"/proc/$guard/comm"; } 2>/dev/null && [ "$name" = dblock ] &&
        { read -r name <"/proc/$holder/comm"; } 2>/dev/null && [ "$name" = dblock ] &&
        kill -KILL "$holder" 2>/dev/null && return 0
    fi
    sleep 0.1
  done
  return 1
}

# parent_of VAR PID: sets VAR to PID's parent (from /proc, builtins alone); false when gone.
parent_of() {
  local -n into=$1
  local line f
  into=
  { read -r line <"/proc/$2/stat"; } 2>/dev/null || return 1
  read -r -a f <<<"${line##*) }"
  into=${f[1]}
}

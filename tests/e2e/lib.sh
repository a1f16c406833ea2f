# Shared by the end-to-end scripts (tests/e2e/test_*.sh): sourced, never run.
# ctest passes DBLOCK_BIN, DBLOCK_TEST_BACKEND (sqlite|mysql|postgres), DBLOCK_TEST_STRATEGY and
# DBLOCK_SOURCE_DIR. This file sets up DBLOCK_DSN (a fresh SQLite file, or the server from
# DBLOCK_TEST_MYSQL_DSN / DBLOCK_TEST_POSTGRES_DSN), a table prefix no other run uses, and
# DBLOCK_STRATEGY; it gives check/assert helpers, a bounded wait_for, background runs
# (start_bg, wait_exit), independent parts side by side (in_parallel, join_parallel: keep
# the suite's minutes down), JSON fields of status/history (json_field, status_field,
# history_field), SQL on the server under test (server_sql), a cleanup trap that kills
# background jobs, and `finish`, which prints "N passed, N failed" and sets the exit status.
# A server backend without a DSN skips the script (exit 77), or fails it when CI=true.

set -uo pipefail

DBLOCK_SOURCE_DIR=${DBLOCK_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
DBLOCK_BIN=${DBLOCK_BIN:-$DBLOCK_SOURCE_DIR/build/dblock}
DBLOCK_TEST_BACKEND=${DBLOCK_TEST_BACKEND:-sqlite}
DBLOCK_TEST_STRATEGY=${DBLOCK_TEST_STRATEGY:-lease}

e2e_passed=0
e2e_failed=0
E2E_TMP=$(mktemp -d "${TMPDIR:-/tmp}/dblock-e2e.XXXXXX")

# python3 is Debian's (scripts/install-deps.sh installs it) ahead of whatever PATH finds first,
# for this script and all it starts: a pyenv shim there took 0.43 s to start python against
# Debian's 0.03 (a bash script and pyenv's own lookup before the interpreter), 0.3-2 s on a busy
# host, and the suite starts python thousands of times (a history test 304). Only the standard
# library is used.
if [ -x /usr/bin/python3 ] && [ "$(command -v python3)" != /usr/bin/python3 ]; then
  mkdir -p "$E2E_TMP/bin" && ln -s /usr/bin/python3 "$E2E_TMP/bin/python3" && PATH=$E2E_TMP/bin:$PATH
fi

# Kills everything this script started in the background (and their process groups, which
# is where dblock puts its commands), then removes the temp dir.
e2e_cleanup() {
  local pid
  for pid in $(jobs -p); do
    kill -KILL "$pid" 2>/dev/null
  done
  if [ -s "$E2E_TMP/pids" ]; then
    while read -r pid; do
      kill -KILL -- "-$pid" 2>/dev/null
      kill -KILL "$pid" 2>/dev/null
    done <"$E2E_TMP/pids"
  fi
  wait 2>/dev/null
  rm -rf "$E2E_TMP"
}
# What else must happen at exit, after the cleanup: commands a script (or a lib that sources
# this one, before sourcing it: tests/cluster/lib.sh stops its cluster) adds with e2e_at_exit.
# One trap runs them all, so an exit anywhere, this file's own checks included, runs each.
e2e_exit_hooks=(${e2e_exit_hooks[@]+"${e2e_exit_hooks[@]}"})
e2e_at_exit() { e2e_exit_hooks+=("$1"); }
e2e_exit() {
  local hook
  e2e_cleanup
  for hook in ${e2e_exit_hooks[@]+"${e2e_exit_hooks[@]}"}; do eval "$hook"; done
}
trap e2e_exit EXIT
trap 'exit 1' INT TERM HUP

skip_or_fail() {
  if [ "${CI:-}" = true ]; then
    echo "FAIL  $1 (CI=true: server tests must not be skipped)"
    exit 1
  fi
  echo "SKIP  $1"
  exit 77
}

case "$DBLOCK_TEST_BACKEND" in
  sqlite) DBLOCK_DSN="sqlite:$E2E_TMP/dblock.db" ;;
  mysql)
    [ -n "${DBLOCK_TEST_MYSQL_DSN:-}" ] || skip_or_fail "DBLOCK_TEST_MYSQL_DSN is not set"
    DBLOCK_DSN=$DBLOCK_TEST_MYSQL_DSN
    ;;
  postgres)
    [ -n "${DBLOCK_TEST_POSTGRES_DSN:-}" ] || skip_or_fail "DBLOCK_TEST_POSTGRES_DSN is not set"
    DBLOCK_DSN=$DBLOCK_TEST_POSTGRES_DSN
    ;;
  *)
    echo "FAIL  unknown DBLOCK_TEST_BACKEND '$DBLOCK_TEST_BACKEND'"
    exit 1
    ;;
esac
# server_sql's DSN: the plain one, also when dblock goes over TLS.
E2E_SQL_DSN=$DBLOCK_DSN
# DBLOCK_TEST_TLS=1: dblock reaches the server over TLS with a verified certificate and a client
# certificate (scripts/test-servers.sh: DBLOCK_TEST_MYSQL_TLS_DSN, DBLOCK_TEST_POSTGRES_TLS_DSN).
if [ "${DBLOCK_TEST_TLS:-}" = 1 ]; then
  case "$DBLOCK_TEST_BACKEND" in
    mysql) DBLOCK_DSN=${DBLOCK_TEST_MYSQL_TLS_DSN:-} ;;
    postgres) DBLOCK_DSN=${DBLOCK_TEST_POSTGRES_TLS_DSN:-} ;;
    *) DBLOCK_DSN= ;;
  esac
  [ -n "$DBLOCK_DSN" ] || skip_or_fail "no TLS DSN for $DBLOCK_TEST_BACKEND (scripts/test-servers.sh exports DBLOCK_TEST_*_TLS_DSN)"
fi
[ -x "$DBLOCK_BIN" ] || { echo "FAIL  no executable dblock at $DBLOCK_BIN"; exit 1; }

# Tables of their own: runs against a shared server (and parallel ctest jobs) never collide.
DBLOCK_TABLE_PREFIX="e2e_$(date +%s)_$$_${RANDOM}_"
DBLOCK_STRATEGY=$DBLOCK_TEST_STRATEGY
export DBLOCK_DSN DBLOCK_TABLE_PREFIX DBLOCK_STRATEGY
# Nothing from the machine's or the user's configuration leaks in.
unset DBLOCK_DSN_FILE DBLOCK_CONFIG
export XDG_CONFIG_HOME="$E2E_TMP/config" XDG_STATE_HOME="$E2E_TMP/state"

is_session_strategy() { [ "$DBLOCK_STRATEGY" != lease ]; }

# `dblock` is the binary itself on PATH (not a shell function), so `dblock run ... &` leaves
# $! = dblock's own pid and a signal sent to it reaches dblock, not a subshell. It is a hard link
# to the build's binary (a copy when the temp dir is on another file system), with the server
# modules beside it, where dblock looks for them: a rebuild while the script runs (the linker
# removes its output and writes a new file, executable only once complete) cannot change or take
# away the binary under test. Through a symbolic link a relink mid-script made `dblock` exit 126
# (Permission denied) or 127 before running anything: a run whose command "never started".
mkdir -p "$E2E_TMP/bin"
dblock_exe=$E2E_TMP/bin/dblock
for e2e_file in "$DBLOCK_BIN" "$(dirname "$DBLOCK_BIN")"/dblock-*.so; do
  [ -f "$e2e_file" ] || continue
  e2e_to=$E2E_TMP/bin/$(basename "$e2e_file")
  [ "$e2e_file" = "$DBLOCK_BIN" ] && e2e_to=$dblock_exe
  ln "$e2e_file" "$e2e_to" 2>/dev/null || cp "$e2e_file" "$e2e_to"
done
export PATH="$E2E_TMP/bin:$PATH"

pass() {
  e2e_passed=$((e2e_passed + 1))
  echo "ok    $1"
}
fail() {
  e2e_failed=$((e2e_failed + 1))
  echo "FAIL  $1"
}

# check NAME COMMAND...: passes when the command succeeds.
check() {
  local name=$1
  shift
  if "$@"; then pass "$name"; else fail "$name"; fi
}

# assert_eq NAME EXPECTED ACTUAL
assert_eq() {
  if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: expected '$2', got '$3'"; fi
}

# assert_status NAME EXPECTED COMMAND...: runs the command, compares its exit status.
assert_status() {
  local name=$1 expected=$2 status=0
  shift 2
  "$@" || status=$?
  assert_eq "$name (exit status)" "$expected" "$status"
}

# expect_line NAME STATUS LINE COMMAND...: the exit status, and LINE as a whole line of stderr
# (the command's output stays in $E2E_TMP/out and $E2E_TMP/err).
expect_line() {
  local name=$1 expected=$2 line=$3 status=0
  shift 3
  "$@" >"$E2E_TMP/out" 2>"$E2E_TMP/err" || status=$?
  assert_eq "$name: exit status" "$expected" "$status"
  if grep -qFx -- "$line" "$E2E_TMP/err"; then pass "$name: message"; else fail "$name: stderr lacks the line '$line': $(cat "$E2E_TMP/err")"; fi
}

# assert_between NAME LOW HIGH VALUE: LOW <= VALUE <= HIGH (integers; generous windows only).
assert_between() {
  if [ "$4" -ge "$2" ] && [ "$4" -le "$3" ]; then pass "$1"; else fail "$1: $4 not within [$2, $3]"; fi
}

# wait_for SECONDS COMMAND...: polls every 0.1 s until the command succeeds; false on timeout.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}

# Milliseconds on the monotonic clock, for timing windows.
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# remember_pid PID: the cleanup trap kills its process group too (a dblock's command).
remember_pid() { echo "$1" >>"$E2E_TMP/pids"; }

# start_bg VAR COMMAND...: runs COMMAND in the background, puts its pid in VAR and remembers it
# for the cleanup trap. The pid is the command's own (bash execs a simple command in the
# forked child), so a signal sent to it reaches dblock, not a subshell. Redirections given
# to start_bg apply to the command.
start_bg() {
  local var=$1
  shift
  "$@" &
  printf -v "$var" %s "$!"
  remember_pid "$!"
}

# race N STATUS_PREFIX CMD...: N background copies of CMD, released at once by a barrier file;
# copy I writes its exit status to STATUS_PREFIX.I. Returns after releasing them (not waiting).
race() {
  local n=$1 prefix=$2 i
  shift 2
  rm -f "$E2E_TMP/go"
  for i in $(seq "$n"); do
    (
      while [ ! -e "$E2E_TMP/go" ]; do sleep 0.01; done
      "$@"
      echo $? >"$prefix.$i"
    ) &
    remember_pid $!
  done
  sleep 0.3
  touch "$E2E_TMP/go"
}

# wait_exit VAR PID [SECONDS]: waits up to SECONDS (default 20) for the background PID to end
# and puts its exit status in VAR; if it is still running then, kills it and puts "timeout".
wait_exit() {
  local var=$1 pid=$2 status=timeout
  if wait_for "${3:-20}" eval "! kill -0 $pid 2>/dev/null"; then
    wait "$pid"
    status=$?
  else
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  printf -v "$var" %s "$status"
}

# json_field PATH...: reads a JSON document on stdin and prints the value at each PATH, space
# separated. A PATH is dot separated: names, list indexes, "#" for a list's length and "*" for
# every element ("locks.0.token", "runs.#", "runs.*.exit_code"). A missing value prints
# "none", JSON null "null", booleans "true"/"false".
json_field() {
  python3 -c '
import json, sys
doc = json.load(sys.stdin)
def show(v):
    if v is None: return "null"
    if isinstance(v, bool): return "true" if v else "false"
    if isinstance(v, list): return " ".join(show(x) for x in v)
    return str(v)
def get(v, parts):
    for i, p in enumerate(parts):
        if p == "#": return len(v)
        if p == "*": return [get(x, parts[i + 1:]) for x in v]
        try:
            v = v[int(p)] if isinstance(v, list) else v[p]
        except (KeyError, IndexError, ValueError, TypeError):
            return "none"
    return v
print(" ".join(show(get(doc, path.split("."))) for path in sys.argv[1:]))' "$@"
}

# status_field KEY FIELD...: fields of KEY from `dblock status KEY --json` (see json_field).
status_field() {
  local k=$1
  shift
  dblock status "$k" --json | json_field "${@/#/locks.0.}"
}

# history_field KEY PATH...: fields from `dblock history KEY --json` ("runs.0.outcome", "runs.#").
history_field() {
  local k=$1
  shift
  dblock history "$k" --json --limit 1000 | json_field "$@"
}

# has_status_fields KEY: `dblock status KEY --json` holds every field man/dblock.1 documents.
has_status_fields() {
  local missing
  missing=$(status_field "$1" key state owner host pid token strategy acquired_at renewed_at expires_at \
    expires_in_ms released_at last_started_at last_finished_at last_exit_code | tr ' ' '\n' | grep -c '^none$')
  [ "$missing" = 0 ] || { echo "      status --json of $1 lacks $missing documented fields"; return 1; }
}

# mysql_client_options: the MySQL DSN under test (mysql://user[:password]@host[:port]/database
# [?options]) split once for the mariadb client: its connection options in the array
# MYSQL_CLIENT_OPTIONS, its password in MYSQL_CLIENT_PWD, for `MYSQL_PWD=$MYSQL_CLIENT_PWD
# mariadb "${MYSQL_CLIENT_OPTIONS[@]}" ...` (the password goes through the environment, never
# on a command line).
mysql_client_options() {
  local rest=${E2E_SQL_DSN#*://} userinfo hostport database host port=3306
  userinfo=${rest%%@*}
  hostport=${rest#*@}
  database=${hostport#*/}
  database=${database%%\?*}
  hostport=${hostport%%/*}
  host=${hostport%%:*}
  [[ $hostport == *:* ]] && port=${hostport#*:}
  MYSQL_CLIENT_PWD=
  [[ $userinfo == *:* ]] && MYSQL_CLIENT_PWD=${userinfo#*:}
  MYSQL_CLIENT_OPTIONS=(--protocol=tcp -h "$host" -P "$port" -u "${userinfo%%:*}" -D "$database" -N -B)
}

# server_sql SQL: runs SQL on the server under test as the test user with its own client
# (mariadb or psql), for at most 10 s, and prints the rows tab separated, without headers.
server_sql() {
  case "$DBLOCK_TEST_BACKEND" in
    mysql)
      local MYSQL_CLIENT_OPTIONS MYSQL_CLIENT_PWD
      mysql_client_options
      MYSQL_PWD=$MYSQL_CLIENT_PWD timeout 30 mariadb "${MYSQL_CLIENT_OPTIONS[@]}" -e "$1"
      ;;
    postgres) timeout 30 psql "$E2E_SQL_DSN" -X -q -A -t -F $'\t' -v ON_ERROR_STOP=1 -c "$1" ;;
    *) echo "server_sql: no server for $DBLOCK_TEST_BACKEND" >&2; return 1 ;;
  esac
  # A client that timed out prints nothing: say so, or the caller's check reads an empty answer.
  local s=$?
  [ "$s" -eq 124 ] && echo "server_sql: the $DBLOCK_TEST_BACKEND client gave no answer in 30 s: $1" >&2
  return "$s"
}

is_held() { dblock status -q "$1" >/dev/null 2>&1; }
is_free() {
  local s=0
  dblock status -q "$1" >/dev/null 2>&1 || s=$?
  [ "$s" -eq 1 ]
}

# lose_a_run KEY: a lease run of KEY whose lease is released under it (--force), so it ends
# `lost`; puts dblock's exit status in $rc. Lease strategy only.
lose_a_run() {
  local runner
  start_bg runner dblock run "$1" --ttl 5 --kill-after 0.5 -- sh -c "echo \$\$ >\"$E2E_TMP/lost\"; exec sleep 30"
  check "lost: command started" wait_for 10 test -s "$E2E_TMP/lost"
  dblock release "$1" --force >/dev/null
  wait_exit rc $runner
}

# in_parallel NAME FUNCTION [ARG...]: runs FUNCTION in a background subshell, so independent
# parts of one script take the time of the longest instead of the sum; its files go in
# $PART_TMP, a directory of its own, and its tables under a prefix of its own (names a script
# derives from DBLOCK_TABLE_PREFIX are derived again inside the part). Its own tables: on one
# PostgreSQL table, two lease runs of two new keys started at once can see one of them refused
# as busy (exit 75), which is not what the parts test. `join_parallel` waits for every part,
# prints each one's output in turn and counts its passes and failures as this script's.
parallel_parts=()
in_parallel() {
  local name=$1
  shift
  mkdir -p "$E2E_TMP/part.$name"
  (
    trap - EXIT  # the script's cleanup is the parent's, once
    PART_TMP=$E2E_TMP/part.$name
    DBLOCK_TABLE_PREFIX=${DBLOCK_TABLE_PREFIX}p${#parallel_parts[@]}_
    e2e_passed=0 e2e_failed=0
    "$@"
    echo "$e2e_passed $e2e_failed" >"$PART_TMP/counts"
  ) >"$E2E_TMP/part.$name/out" 2>&1 &
  remember_pid $!
  parallel_parts+=("$name:$!")
}
join_parallel() {
  local part name passed failed
  for part in "${parallel_parts[@]}"; do
    name=${part%%:*}
    wait "${part#*:}"
    cat "$E2E_TMP/part.$name/out"
    if read -r passed failed 2>/dev/null <"$E2E_TMP/part.$name/counts"; then
      e2e_passed=$((e2e_passed + passed)) e2e_failed=$((e2e_failed + failed))
    else
      fail "part $name ended before it counted its checks"
    fi
  done
  parallel_parts=()
}

# timed_handoff KEY [WAITER_OPTION...]: a holder of KEY runs 2.5 s while a `run -w` waiter
# (given the options, before `run`) waits for it; puts the ms from the holder's command ending
# to the waiter's command starting in $handoff_gap ("" when either failed, which is reported).
timed_handoff() {
  local k=$1 holder waiter hs ws
  shift
  local dir=${PART_TMP:-$E2E_TMP}
  handoff_gap=""
  rm -f "$dir/end" "$dir/start" "$dir/took"
  # The holder's command says it runs (so the key is held) in a file: a status poll could miss
  # the whole 2.5 s hold on a loaded machine, and a status that reads a busy database says nothing.
  start_bg holder dblock run "$k" -- sh -c "touch '$dir/took'; sleep 2.5; date +%s%N >'$dir/end'"
  wait_for 10 test -e "$dir/took" || fail "the holder did not take $k"
  start_bg waiter dblock "$@" run -w 30s "$k" -- sh -c "date +%s%N >'$dir/start'"
  wait_exit hs "$holder" 30
  wait_exit ws "$waiter" 30
  if [ "$hs" = 0 ] && [ "$ws" = 0 ] && [ -s "$dir/end" ] && [ -s "$dir/start" ]; then
    handoff_gap=$((($(cat "$dir/start") - $(cat "$dir/end")) / 1000000))
  else
    fail "handoff of $k: holder exit $hs, waiter exit $ws"
  fi
}

# mysql_count_proxy LIFETIME [OPTION...]: tests/e2e/mysql_count_proxy.py in front of
# $DBLOCK_DSN's server, counting into $E2E_TMP/counts, for LIFETIME seconds (OPTIONs go to the
# proxy); sets $proxied, the DSN through it. False when it did not start.
mysql_count_proxy() {
  local lifetime=$1 rest userinfo hostpart hostport port
  shift
  rest=${DBLOCK_DSN#*://}
  userinfo=${rest%%@*}
  hostpart=${rest#*@}
  hostport=${hostpart%%/*}
  port=${hostport##*:}
  [ "$port" != "$hostport" ] || port=3306
  python3 "$DBLOCK_SOURCE_DIR/tests/e2e/mysql_count_proxy.py" --target-port "$port" \
    --port-file "$E2E_TMP/proxy.port" --count-file "$E2E_TMP/counts" --lifetime "$lifetime" "$@" &
  remember_pid $!
  wait_for 10 test -s "$E2E_TMP/proxy.port" || return 1
  proxied="mysql://$userinfo@127.0.0.1:$(cat "$E2E_TMP/proxy.port")/${hostpart#*/}"
}

# plain_dsn_via PORT: $DBLOCK_DSN (a PostgreSQL or MySQL URL) through a proxy of the test's own
# on 127.0.0.1:PORT, without TLS (a counting or delay proxy reads or times the plain protocol).
plain_dsn_via() {
  python3 -c '
import sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
netloc = u.netloc.rsplit("@", 1)
host = "127.0.0.1:" + sys.argv[2]
netloc = netloc[0] + "@" + host if len(netloc) == 2 else host
if u.scheme == "mysql":
    query = "&".join(q for q in u.query.split("&") if q and not q.startswith("ssl-"))
    query += ("&" if query else "") + "ssl-mode=DISABLED"
else:
    query = u.query + ("&" if u.query else "") + "sslmode=disable"
print(urllib.parse.urlunsplit((u.scheme, netloc, u.path, query, u.fragment)))' "$DBLOCK_DSN" "$1"
}

# A key unique to this script and test, so scripts sharing a server never meet.
key() { echo "e2e-$$-$1"; }

finish() {
  echo "$e2e_passed passed, $e2e_failed failed"
  if [ "$e2e_failed" -eq 0 ] && [ "$e2e_passed" -gt 0 ]; then exit 0; else exit 1; fi
}

# subcommand_bounds ACQUIRE RENEW RELEASE STATUS: the round trips of the subcommands at most
# these (man dblock, NOTES "Round trips"), each counted by the caller's
# `sub_bound LABEL BOUND ARGS...` on its own server's counter: acquire, renew and release by
# token; status of a held lease, of a free key, of every key, and of a key each session strategy
# holds (status asks the server whether the holder's session still holds its lock; the three
# holders at once, so the test stays short).
subcommand_bounds() {
  local acquire=$1 renew=$2 release=$3 status=$4 k token go s h rc
  local -A holders=()
  k=$(key cli)
  dblock acquire "$k" --ttl 60s >/dev/null && dblock release "$k" --force >/dev/null || fail "cli: warm-up"
  sub_bound "acquire" "$acquire" acquire "$k" --ttl 60s
  token=$(cat "$E2E_TMP/sub.out")
  sub_bound "renew --token" "$renew" renew "$k" --token "$token" --ttl 60s
  sub_bound "status KEY, a held lease" "$status" status "$k"
  sub_bound "release --token" "$release" release "$k" --token "$token"
  sub_bound "status KEY, a free key" "$status" status "$k"
  sub_bound "status, every key" "$status" status
  go="$E2E_TMP/go-status"
  for s in advisory for-update txn-insert; do
    start_bg h dblock -s "$s" run "$(key "status-$s")" -- sh -c "while [ ! -e '$go' ]; do sleep 0.05; done"
    holders[$s]=$h
  done
  for s in advisory for-update txn-insert; do
    wait_for 10 is_held "$(key "status-$s")" || fail "status $s: the holder never held"
    sub_bound "status KEY, held by $s" "$status" status "$(key "status-$s")"
  done
  touch "$go"
  for s in advisory for-update txn-insert; do
    wait_exit rc "${holders[$s]}" 10
    assert_eq "status $s: the holder exits 0" 0 "$rc"
  done
}

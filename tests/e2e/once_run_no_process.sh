#!/usr/bin/env bash
# A run whose command cannot be given a process (fork fails: a process limit, memory) exits 71
# (EX_OSERR, as flock(1)), not 126: the command never ran and is not unexecutable. The message
# names the cause and the limit; the lock is given back and no history row says it ran
# (dblock(1), EXIT STATUS). The fork fails for real: RLIMIT_NPROC counts every task (threads
# too) of a user, so a user that runs nothing else gets exactly N tasks. With a limit of 1 the
# guard's fork fails, with 2 the heartbeat's thread (both before the lock is asked for); with 3
# the guard's clone of the command fails (the lock is held then; dblock, its heartbeat's thread
# and the guard are the three tasks).
# Needs root: it acts as a uid of its own (setpriv), which root's own limit would not bind, and
# works on either cgroup layout (no cgroup is made).
source "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root, to run dblock as a uid that runs nothing else"
command -v setpriv >/dev/null || skip_or_fail "setpriv is needed"
command -v prlimit >/dev/null || skip_or_fail "prlimit is needed"

# A uid with no account and no process: its task count is what this script starts.
uid_busy() { getent passwd "$1" >/dev/null || [ -n "$(ps -o pid= -u "$1" 2>/dev/null)" ]; }
uid=$((61000 + $$ % 4000))
while uid_busy "$uid"; do uid=$((uid + 1)); done

chmod 0711 "$E2E_TMP"
home=$E2E_TMP/home
mkdir -m 0700 "$home"
chown "$uid:$uid" "$home"
db=sqlite:$home/dblock.db

# The runs log to a stand-in for the journal (--log journal --log-runs), which root runs and
# the uid may write to: a command that never started logs its error, neither a start nor an end.
journal_out=$E2E_TMP/journal.jsonl
touch "$journal_out"
start_bg listener_pid python3 "$DBLOCK_SOURCE_DIR/tests/e2e/journal_listener.py" "$E2E_TMP/journal.sock" "$journal_out"
check "the journal listener is up" wait_for 10 test -S "$E2E_TMP/journal.sock"
chmod 0666 "$E2E_TMP/journal.sock"
# entries OUTCOME KEY [EXIT]: how many journal entries of that DBLOCK_OUTCOME and DBLOCK_KEY (and
# DBLOCK_EXIT) arrived; entries_are N OUTCOME KEY: that many.
entries() {
  python3 - "$journal_out" "$@" <<'PY'
import json, sys
want = dict(zip(("DBLOCK_OUTCOME", "DBLOCK_KEY", "DBLOCK_EXIT"), sys.argv[2:]))
print(sum(1 for line in open(sys.argv[1]) if all(json.loads(line).get(f) == v for f, v in want.items())))
PY
}
entries_are() { [ "$(entries "${@:2}")" = "$1" ]; }

# as_uid NPROC ARGS...: dblock ARGS as the uid, with at most NPROC tasks (0: no limit).
as_uid() {
  local nproc=$1
  shift
  local limit=()
  [ "$nproc" -gt 0 ] && limit=(prlimit --nproc="$nproc":"$nproc")
  "${limit[@]}" setpriv --reuid="$uid" --regid="$uid" --clear-groups -- \
    env -i PATH=/usr/bin:/bin HOME="$home" XDG_CONFIG_HOME="$home" XDG_STATE_HOME="$home" \
    DBLOCK_JOURNAL_SOCKET="$E2E_TMP/journal.sock" \
    "$E2E_TMP/bin/dblock" "$@"
}
check "the uid runs dblock without a limit" as_uid 0 -q init -d "$db"

for nproc in 1 2 3; do
  case $nproc in
    1) what="limit 1 (the guard's fork fails)" made=fork ;;
    2) what="limit 2 (the heartbeat's thread cannot be made)" made="the heartbeat's thread" ;;
    3) what="limit 3 (the command's clone fails)" made=fork ;;
  esac
  k=$(key "n$nproc")
  ran=$home/ran.$nproc
  status=0
  as_uid "$nproc" run -d "$db" --log journal --log-runs --min-hold 1h "$k" -- /bin/sh -c "touch $ran" \
    >"$E2E_TMP/out" 2>"$E2E_TMP/err" || status=$?
  err=$(cat "$E2E_TMP/err")
  assert_eq "$what: exit 71, not 126 (stderr: $err)" 71 "$status"
  check "$what: the message names what could not be made and why" \
    grep -qFx "dblock: cannot start /bin/sh: $made: Resource temporarily unavailable (a process limit is reached: ulimit -u, systemd's TasksMax=, a cgroup's pids.max)" <<<"$err"
  check "$what: the command never ran" test ! -e "$ran"
  assert_status "$what: the lock is free at once (no --min-hold kept)" 1 as_uid 0 status -d "$db" -q "$k"
  assert_eq "$what: no history row" "" "$(as_uid 0 history -d "$db" -n "$k")"
  assert_status "$what: the next run of the key starts" 0 \
    as_uid 0 run -d "$db" --log journal --log-runs "$k" -- /bin/sh -c "touch $ran"
  check "$what: and its command ran" test -e "$ran"
  # The next run's end arrives last: then every entry of both runs is in.
  check "$what: the journal has the next run's end" wait_for 10 entries_are 1 ok "$k"
  assert_eq "$what: the journal has the error, with exit 71" 1 "$(entries error "$k" 71)"
  assert_eq "$what: one start in the journal, the next run's (none for the command that never started)" 1 \
    "$(entries started "$k")"
  assert_eq "$what: no failed run in the journal" 0 "$(entries failed "$k")"
done

check "the uid is left running nothing" test -z "$(ps -o pid= -u "$uid")"
finish

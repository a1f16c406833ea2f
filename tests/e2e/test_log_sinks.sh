#!/usr/bin/env bash
# cells: (sqlite|mysql|postgres):lease
# --log syslog|journal: every decision that matters arrives at a real receiver, also with -q
# and -E 0. syslog: Debian's rsyslogd on a private socket (imuxsock), writing what it got to
# a file; journal: tests/e2e/journal_listener.py speaking the journal's native protocol. dblock
# is pointed at them with DBLOCK_SYSLOG_SOCKET / DBLOCK_JOURNAL_SOCKET (man/dblock.1 LOGGING).
source "$(dirname "$0")/lib.sh"

need_tool() {
  command -v "$1" >/dev/null 2>&1 && return
  skip_or_fail "$1 is not installed (Debian package $2; scripts/install-deps.sh)"
}
need_tool rsyslogd rsyslog
need_tool python3 python3

# rsyslogd, unprivileged paths only: its own socket, no /dev/log, no rate limit.
rs=$E2E_TMP/rsyslog
mkdir -p "$rs"
cat >"$rs/rsyslog.conf" <<CONF
global(workDirectory="$rs")
module(load="imuxsock" SysSock.Use="off")
input(type="imuxsock" Socket="$rs/log" RateLimit.Interval="0")
template(name="line" type="string" string="%syslogseverity% %syslogfacility-text% %programname%[%procid%]:%msg%\n")
*.* action(type="omfile" file="$rs/messages" template="line")
CONF
start_bg rsyslog_pid rsyslogd -n -f "$rs/rsyslog.conf" -i "$rs/pid"
check "rsyslogd listens on its private socket" wait_for 10 test -S "$rs/log"
touch "$rs/messages"
export DBLOCK_SYSLOG_SOCKET=$rs/log

journal_out=$E2E_TMP/journal.jsonl
touch "$journal_out"
start_bg listener_pid python3 "$DBLOCK_SOURCE_DIR/tests/e2e/journal_listener.py" "$E2E_TMP/journal.sock" "$journal_out"
check "the journal listener is up" wait_for 10 test -S "$E2E_TMP/journal.sock"
export DBLOCK_JOURNAL_SOCKET=$E2E_TMP/journal.sock

# syslog_line SEVERITY TEXT: a line of that severity containing TEXT arrived (within 10 s).
syslog_line() { wait_for 10 grep -qF -- "$1 user dblock[" "$rs/messages" && wait_for 10 grep -q -- "^$1 user dblock\[[0-9]*\]: .*$2" "$rs/messages"; }

# journal_entry OUTCOME KEY: the last entry with these DBLOCK_OUTCOME and DBLOCK_KEY, as JSON
# (waits up to 10 s for it); "{}" when none came.
journal_entry() {
  wait_for 10 grep -qF "\"DBLOCK_OUTCOME\": \"$1\"" "$journal_out"
  python3 - "$journal_out" "$1" "$2" <<'PY'
import json, sys
found = {}
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("DBLOCK_OUTCOME") == sys.argv[2] and e.get("DBLOCK_KEY") == sys.argv[3]:
        found = e
print(json.dumps(found))
PY
}
# jfield OUTCOME KEY FIELD...: fields of that entry ("none" when missing).
jfield() {
  local outcome=$1 k=$2
  shift 2
  journal_entry "$outcome" "$k" | json_field "$@"
}

holder_pid=
hold() {  # hold KEY OWNER: a run holding KEY in the background, as OWNER
  start_bg holder_pid dblock run "$1" --owner "$2" -- sleep 60
  check "$2 holds $1" wait_for 15 is_held "$1"
}

# ---- syslog ----------------------------------------------------------------------------
k=$(key sys-skip)
hold "$k" "holder-sys"
assert_status "syslog: a skip with -q -E 0 exits 0" 0 dblock -q --log syslog run "$k" -E 0 -- true
check "syslog: the skip arrived at notice, naming the holder" syslog_line 5 "skipped '$k': held by holder-sys"

# Waited and acquired: the holder ends (SIGTERM is passed to its command, it releases).
start_bg waiter env DBLOCK_LOG=syslog dblock -q run "$k" -w 30 -- true
sleep 1
kill -TERM "$holder_pid"
wait_exit rc "$waiter" 30
assert_eq "syslog: the waiter (DBLOCK_LOG=syslog) ran after waiting" 0 "$rc"
check "syslog: 'acquired after waiting' arrived, naming whom it waited for" \
  syslog_line 6 "acquired '$k' with token [0-9]* after waiting .* for holder-sys"

k=$(key sys-maxhold)
assert_status "syslog: --max-hold with -q exits 124" 124 \
  dblock -q --log syslog run "$k" --max-hold 0.5 --kill-after 1 -- sh -c "trap '' TERM; sleep 30"
check "syslog: max-hold arrived as an error" syslog_line 3 "--max-hold 500ms expired for '$k'"
check "syslog: the SIGKILL after --kill-after arrived" syslog_line 4 "the command of '$k' outlived --kill-after 1s"

k=$(key sys-lost)
assert_status "syslog: a lease taken over before the release exits 76" 76 env LOST_DSN="$DBLOCK_DSN" \
  dblock -q --log syslog run "$k" -- sh -c 'DBLOCK_DSN=$LOST_DSN dblock release "$DBLOCK_KEY" --force'
check "syslog: the loss arrived" syslog_line 3 "the lock on '$k' was lost while the command ran"

k=$(key sys-runs)
cfg=$E2E_TMP/log.conf
printf 'log = "syslog"\nlog-runs = true\n' >"$cfg"
assert_status "syslog from the config file, with log-runs: the command's status" 3 \
  env DBLOCK_CONFIG="$cfg" dblock -q run "$k" -- sh -c 'exit 3'
check "log-runs: the start arrived" syslog_line 6 "started '$k' with token [0-9]*: sh"
check "log-runs: the end arrived as a warning" syslog_line 4 "finished '$k' (failed, status 3) with exit status 3"

k=$(key sys-error)
assert_status "syslog: a command that cannot be executed is 127" 127 dblock -q --log syslog run "$k" -- /nonexistent/cmd
check "syslog: the error arrived" syslog_line 3 "cannot execute /nonexistent/cmd"
assert_status "syslog: a usage error is 64" 64 dblock --log syslog run "$k" --ttl 2 -- true 2>/dev/null
check "syslog: the usage error arrived" syslog_line 3 "--ttl 2s is too short"

# ---- journal ---------------------------------------------------------------------------
k=$(key j-skip)
hold "$k" "holder-j"
assert_status "journal: a skip with -q -E 0 exits 0" 0 dblock -q --log journal run "$k" -E 0 -- true
assert_eq "journal: skipped entry: key, holder, exit, priority, identifier" \
  "$k holder-j 0 5 dblock" "$(jfield skipped "$k" DBLOCK_KEY DBLOCK_HOLDER DBLOCK_EXIT PRIORITY SYSLOG_IDENTIFIER)"
check "journal: its MESSAGE names the holder" bash -c "[[ \$(cat) == *\"skipped '$k': held by holder-j\"* ]]" \
  <<<"$(jfield skipped "$k" MESSAGE)"
assert_status "journal: a skip exits 75 by default" 75 dblock -q --log journal run "$k" -- true

holder_token=$(status_field "$k" token)
start_bg waiter dblock -q --log journal run "$k" -w 30 -- true
sleep 1
kill -TERM "$holder_pid"
wait_exit rc "$waiter" 30
assert_eq "journal: the waiter ran after waiting" 0 "$rc"
read -r jholder jtoken <<<"$(jfield acquired "$k" DBLOCK_HOLDER DBLOCK_TOKEN)"
assert_eq "journal: acquired entry names whom it waited for" holder-j "$jholder"
check "journal: acquired entry has a newer token ($jtoken > $holder_token)" test "$jtoken" -gt "$holder_token"

k=$(key j-maxhold)
assert_status "journal: --max-hold exits 124" 124 \
  dblock -q --log journal run "$k" --max-hold 0.5 --kill-after 1 -- sh -c "trap '' TERM; sleep 30"
read -r mtoken mexit mprio <<<"$(jfield max-hold "$k" DBLOCK_TOKEN DBLOCK_EXIT PRIORITY)"
assert_eq "journal: max-hold entry: exit 124 at priority 3" "124 3" "$mexit $mprio"
check "journal: max-hold entry has the run's token" test "$mtoken" -gt 0
assert_eq "journal: killed entry" "$mtoken 4" "$(jfield killed "$k" DBLOCK_TOKEN PRIORITY)"

k=$(key j-lost)
start_bg runner dblock -q --log journal run "$k" --ttl 6 --kill-after 1 -- sleep 60
check "journal: the lease is held" wait_for 15 is_held "$k"
ltoken=$(status_field "$k" token)
assert_status "journal: release --force from another process" 0 dblock release "$k" --force
wait_exit rc "$runner" 30
assert_eq "journal: a stolen lease ends the run with 76" 76 "$rc"
assert_eq "journal: lost entry: token, exit, priority" "$ltoken 76 3" "$(jfield lost "$k" DBLOCK_TOKEN DBLOCK_EXIT PRIORITY)"

k=$(key j-runs)
assert_status "journal with --log-runs: the command's status" 0 dblock --log journal --log-runs run "$k" -- true
assert_eq "journal: start entry" "$k none" "$(jfield started "$k" DBLOCK_KEY DBLOCK_EXIT)"
assert_eq "journal: end entry has the outcome and exit" "0 6" "$(jfield ok "$k" DBLOCK_EXIT PRIORITY)"

k=$(key j-error)
assert_status "journal: a command that cannot be executed is 127" 127 dblock -q --log journal run "$k" -- /nonexistent/cmd
assert_eq "journal: error entry" "127 3" "$(jfield error "$k" DBLOCK_EXIT PRIORITY)"
check "journal: every entry parsed" bash -c "! grep -q _MALFORMED '$journal_out'"

# ---- the default and a sink that cannot be reached -------------------------------------
k=$(key quiet-default)
lines_before=$(cat "$rs/messages" "$journal_out" | wc -l)
assert_status "default --log stderr: a run" 0 dblock --log-runs run "$k" -- true
sleep 0.5
assert_eq "default --log stderr sends nothing to syslog or the journal" "$lines_before" \
  "$(cat "$rs/messages" "$journal_out" | wc -l)"
err=$(DBLOCK_SYSLOG_SOCKET=$E2E_TMP/nothing-here dblock --log syslog --log-runs run "$k" -- true 2>&1)
assert_eq "an unreachable syslog socket is one line on stderr" 1 "$(grep -c "cannot write to --log syslog" <<<"$err")"
assert_status "an unreachable syslog socket does not change the exit status" 0 \
  env DBLOCK_SYSLOG_SOCKET="$E2E_TMP/nothing-here" dblock --log syslog run "$k" -- true 2>/dev/null
assert_status "--log with another value is a usage error" 64 dblock --log file run "$k" -- true 2>/dev/null

finish

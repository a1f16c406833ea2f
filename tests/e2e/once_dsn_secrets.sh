#!/usr/bin/env bash
# DSNs and their passwords (dblock(1), DSN and OPTIONS): an empty DSN from any source is exit 78
# naming the source, never the local default; passwords libpq accepts ("se?cret",
# "?pass%77ord=") are hidden from doctor, error messages, syslog and ps; a short password leaves
# messages whole; a DSN file with a password must be private; core dumps are off once a
# password is read. Needs no server: a closed port, or a port that accepts and never answers.
source "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || skip_or_fail "python3 is not installed"

err=$E2E_TMP/err

# An empty DSN, wherever it comes from. A job behind it never starts.
empty_tail="the DSN is empty (an unset variable?); give one, or leave the setting out for the default"
assert_status "-d ''" 78 dblock -d "" status 2>"$err"
check "-d '': the line names --dsn" grep -q "^dblock: --dsn: $empty_tail sqlite:/" "$err"
# As root the default is /var/lib/dblock: where that would be written, another user runs it.
as_other=()
[ "$(id -u)" = 0 ] && as_other=(setpriv --reuid=65534 --regid=65534 --clear-groups)
mkdir -p "$E2E_TMP/state-other" && chmod 711 "$E2E_TMP" && chmod 777 "$E2E_TMP/state-other"
assert_status "-d '' run" 78 "${as_other[@]}" env XDG_STATE_HOME="$E2E_TMP/state-other" \
  "$DBLOCK_BIN" -d "" run "$(key empty)" -- touch "$E2E_TMP/state-other/ran" 2>/dev/null
check "-d '' run: the command did not run" test ! -e "$E2E_TMP/state-other/ran"
assert_status "DBLOCK_DSN=''" 78 env DBLOCK_DSN= "$DBLOCK_BIN" status 2>"$err"
check "DBLOCK_DSN='': the line names it" grep -q "^dblock: DBLOCK_DSN: $empty_tail" "$err"
expect_line "DBLOCK_DSN_FILE=''" 78 "dblock: DBLOCK_DSN_FILE: the DSN file name is empty" \
  env -u DBLOCK_DSN DBLOCK_DSN_FILE= "$DBLOCK_BIN" status
expect_line "--dsn-file ''" 78 "dblock: --dsn-file: the DSN file name is empty" dblock --dsn-file "" status
printf '\n  \n# nothing\n' >"$E2E_TMP/blank.dsn"
expect_line "a blank DSN file" 78 "dblock: --dsn-file $E2E_TMP/blank.dsn holds no DSN" dblock --dsn-file "$E2E_TMP/blank.dsn" status
printf 'dsn = ""\n' >"$E2E_TMP/empty-dsn.conf"
assert_status "config dsn = ''" 78 env -u DBLOCK_DSN "$DBLOCK_BIN" --config "$E2E_TMP/empty-dsn.conf" status 2>"$err"
check "config dsn = '': the line names the file and line" \
  grep -q "^dblock: config file $E2E_TMP/empty-dsn.conf line 1: dsn: $empty_tail" "$err"
printf 'dsn-file = ""\n' >"$E2E_TMP/empty-file.conf"
expect_line "config dsn-file = ''" 78 "dblock: config file $E2E_TMP/empty-file.conf line 1: dsn-file: the DSN file name is empty" \
  env -u DBLOCK_DSN "$DBLOCK_BIN" --config "$E2E_TMP/empty-file.conf" status
assert_status "DBLOCK_DSN='' beats the config file's DSN" 78 \
  env DBLOCK_DSN= "$DBLOCK_BIN" --config "$E2E_TMP/empty-file.conf" status 2>/dev/null
# No DSN at all is still the default.
env -u DBLOCK_DSN "$DBLOCK_BIN" -v status >/dev/null 2>"$err"
check "no DSN at all: the default SQLite file" grep -q "^dblock: database sqlite:/" "$err"

# Two helpers: a TCP port that accepts and never answers (a connect hangs there), and a
# syslog socket that keeps each datagram as a line.
cat >"$E2E_TMP/listen.py" <<'PY'
import socket, sys
kind, where, out = sys.argv[1:4]
if kind == "syslog":
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(where)
    with open(out, "ab", buffering=0) as f:
        while True:
            f.write(s.recv(65536) + b"\n")
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
held = []
with open(out, "a", buffering=1) as f:
    open(where + ".tmp", "w").write(str(s.getsockname()[1]))
    __import__("os").rename(where + ".tmp", where)
    while True:
        held.append(s.accept()[0])
        f.write("accepted\n")
PY
start_bg syslog_pid python3 "$E2E_TMP/listen.py" syslog "$E2E_TMP/syslog.sock" "$E2E_TMP/syslog"
start_bg silent_pid python3 "$E2E_TMP/listen.py" tcp "$E2E_TMP/port" "$E2E_TMP/accepted"
check "the syslog socket is up" wait_for 10 test -S "$E2E_TMP/syslog.sock"
check "the silent port is up" wait_for 10 test -s "$E2E_TMP/port"
silent_port=$(cat "$E2E_TMP/port")
export DBLOCK_SYSLOG_SOCKET=$E2E_TMP/syslog.sock

# shows_none NAME SECRET FILE...: SECRET appears in none of the files.
shows_none() {
  local name=$1 secret=$2
  shift 2
  if grep -qF -- "$secret" "$@"; then fail "$name shows '$secret': $(grep -hF -- "$secret" "$@" | head -3)"; else pass "$name hides the password"; fi
}

# A dblock that hangs connecting to the silent port, as another user when root (so that the
# owner of its /proc/PID/status tells whether it is dumpable: a non-dumpable process's belongs to root).
own_uid=$( [ "$(id -u)" = 0 ] && echo 65534 || id -u)
connects=0
accepted_at_least() { [ "$(wc -l <"$E2E_TMP/accepted")" -ge "$1" ]; }
start_hanging() {
  start_bg pid "${as_other[@]}" "$DBLOCK_BIN" -d "$1" --connect-timeout 60s status 2>/dev/null
  connects=$((connects + 1))
  check "$1: dblock is connecting" wait_for 20 accepted_at_least "$connects"
}
stop_hanging() {
  kill "$pid"
  wait "$pid" 2>/dev/null
}

# Passwords that libpq accepts: a plain '?' in the user info, a percent-encoded keyword.
for form in 'postgres://alice:se?cret@127.0.0.1:PORT/db|se?cret' \
            'postgres://alice@127.0.0.1:PORT/db?pass%77ord=hunter2|hunter2'; do
  dsn=${form%|*} secret=${form#*|}
  closed=${dsn/PORT/1}
  dblock -d "$closed" doctor >"$E2E_TMP/doctor" 2>&1
  check "doctor of $closed fails to connect" grep -q "FAIL  connect: cannot connect to " "$E2E_TMP/doctor"
  shows_none "doctor of $closed" "$secret" "$E2E_TMP/doctor"
  : >"$E2E_TMP/syslog"
  assert_status "status via $closed" 69 dblock -d "$closed" --log syslog status 2>"$err"
  check "$closed: the failed connect reached syslog" wait_for 10 grep -q "cannot connect to postgres://alice" "$E2E_TMP/syslog"
  shows_none "the failed connect's message on stderr" "$secret" "$err"
  shows_none "the failed connect's syslog line" "$secret" "$E2E_TMP/syslog"
  check "$closed: the warning says ps saw a password" grep -q "visible to ps" "$err"

  # ps: the argument list, read while dblock waits; and core dumps are off.
  hanging=${dsn/PORT/$silent_port}
  start_hanging "$hanging"
  tr '\0' ' ' <"/proc/$pid/cmdline" >"$E2E_TMP/cmdline"
  shows_none "/proc/PID/cmdline of $hanging" "$secret" "$E2E_TMP/cmdline"
  check "$hanging: cmdline is the scrubbed DSN" grep -q "postgres://alice" "$E2E_TMP/cmdline"
  assert_eq "$hanging: not dumpable (/proc/PID/status belongs to root)" 0 "$(stat -c %u "/proc/$pid/status")"
  stop_hanging
done
# The control: without a password, dumps stay on.
start_hanging "postgres://alice@127.0.0.1:$silent_port/db"
assert_eq "no password: dumpable (/proc/PID/status its own)" "$own_uid" "$(stat -c %u "/proc/$pid/status")"
stop_hanging

# A short password leaves the message whole (and does not show where it would stand).
expect_line "password 'p'" 78 "dblock: invalid DSN 'mysql://u:****@127.0.0.1:99999/db': port out of range" \
  dblock -d 'mysql://u:p@127.0.0.1:99999/db' status

# A DSN file with a password: readable by group or others warns naming the mode; wider than
# 0600 and owned by another user is refused.
echo "postgres://alice:Sup3rS3cret@127.0.0.1:1/db" >"$E2E_TMP/secret.dsn"
chmod 640 "$E2E_TMP/secret.dsn"
expect_line "DSN file 0640" 69 \
  "dblock: warning: DSN file $E2E_TMP/secret.dsn holds a password and is readable by other users (mode 0640; chmod 600 it)" \
  dblock --dsn-file "$E2E_TMP/secret.dsn" status
echo "postgres://alice@127.0.0.1:1/db?pass%77ord=Sup3rS3cret" >"$E2E_TMP/keyword.dsn"
chmod 644 "$E2E_TMP/keyword.dsn"
expect_line "DSN file 0644, password as an encoded keyword" 69 \
  "dblock: warning: DSN file $E2E_TMP/keyword.dsn holds a password and is readable by other users (mode 0644; chmod 600 it)" \
  dblock --dsn-file "$E2E_TMP/keyword.dsn" status
if [ "$(id -u)" = 0 ]; then
  # Another user's DSN file is refused whatever its mode (tests/e2e/once_config_trust.sh).
  chown 65534 "$E2E_TMP/secret.dsn"
  expect_line "another user's DSN file 0640" 78 \
    "dblock: DSN file $E2E_TMP/secret.dsn belongs to uid 65534 (nobody), not to root: refused, as its owner decides what dblock does (as root: chown root $E2E_TMP/secret.dsn)" \
    dblock --dsn-file "$E2E_TMP/secret.dsn" status
  chmod 600 "$E2E_TMP/secret.dsn"
  assert_status "another user's DSN file 0600 is refused too" 78 dblock --dsn-file "$E2E_TMP/secret.dsn" status 2>"$err"
fi
shows_none "the DSN file checks" Sup3rS3cret "$err" "$E2E_TMP/out"

finish

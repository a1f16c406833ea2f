#!/usr/bin/env bash
# Owners are text other users read: --owner follows the key's rule (1 to 255 bytes of UTF-8, no
# control characters, exit 64) on every backend, and an owner forged straight into the lock
# tables (anyone who may write them can) reaches no terminal or log raw: status, history, the
# -v line, the waiting message and a syslog line show its control characters as \xhh
# (man/dblock.1, DESCRIPTION).
source "$(dirname "$0")/lib.sh"

k=$(key owner)
assert_status "--owner with a carriage return: usage" 64 dblock run "$k" --owner $'a\rb' -- true
assert_status "--owner with an escape: usage" 64 dblock acquire "$k" --owner $'a\e[2Kb'
assert_status "--owner of 256 bytes: usage" 64 dblock run "$k" --owner "$(printf 'o%.0s' {1..256})" -- true
assert_status "release --owner with a newline: usage" 64 dblock release "$k" --owner $'a\nb'
assert_status "--owner of 255 bytes is fine" 0 dblock run "$k" --owner "$(printf 'o%.0s' {1..255})" -- true
assert_status "--owner in UTF-8 is fine" 0 dblock run "$k" --owner "hôte-Ω" -- true

# forge KEY: every row of KEY in both tables gets the owner ev<CR><ESC>[2Kil.
forge() {
  local locks=${DBLOCK_TABLE_PREFIX}locks runs=${DBLOCK_TABLE_PREFIX}runs value
  case "$DBLOCK_TEST_BACKEND" in
    sqlite) value="'ev' || char(13) || char(27) || '[2Kil'" ;;
    mysql) value="CONCAT('ev', CHAR(13), CHAR(27), '[2Kil')" ;;
    postgres) value="'ev' || chr(13) || chr(27) || '[2Kil'" ;;
  esac
  local sql="UPDATE $locks SET owner = $value WHERE name = '$1'; UPDATE $runs SET owner = $value WHERE name = '$1';"
  if [ "$DBLOCK_TEST_BACKEND" = sqlite ]; then
    sqlite3 -cmd ".timeout 5000" "${DBLOCK_DSN#sqlite:}" "$sql"
  else
    server_sql "$sql"
  fi
}

# no_raw_controls FILE: FILE holds no carriage return and no escape.
no_raw_controls() {
  python3 -c 'import sys; data = open(sys.argv[1], "rb").read(); sys.exit(1 if b"\r" in data or b"\x1b" in data else 0)' "$1"
}
# clean NAME FILE: FILE holds no raw control character and shows the owner escaped.
clean() {
  check "$1: no raw control character" no_raw_controls "$2"
  check "$1: the owner shown escaped" grep -qF 'ev\x0d\x1b[2Kil' "$2"
}

start_bg holder dblock run "$k" --owner forge-me -- sleep 30 2>/dev/null
check "the holder holds $k" wait_for 10 is_held "$k"
dblock run "$k" -- true  # a finished run in the history, to forge as well
check "the owner is forged" forge "$k"

dblock status "$k" >"$E2E_TMP/status" 2>&1
clean "status" "$E2E_TMP/status"
dblock status "$k" --raw >"$E2E_TMP/status-raw" 2>&1
check "status --raw: no raw control character" no_raw_controls "$E2E_TMP/status-raw"
assert_eq "status --json: the owner read back exact" $'ev\r\e[2Kil' "$(dblock status "$k" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["locks"][0]["owner"])')"
dblock history "$k" >"$E2E_TMP/history" 2>&1
clean "history" "$E2E_TMP/history"

assert_status "-v run while held: skipped" 75 dblock -v run "$k" -- true 2>"$E2E_TMP/verbose"
clean "the -v line" "$E2E_TMP/verbose"

# The waiting message needs a terminal: script(1) gives one (without its \n -> \r\n).
script -qec "stty -onlcr; dblock run -w 1s '$k' -- true" /dev/null >"$E2E_TMP/waiting" 2>&1
check "the waiting message was printed" grep -q "waiting for" "$E2E_TMP/waiting"
# (A PostgreSQL session lock's waiter does not learn who holds it, and names no owner.)
if grep -q "held by" "$E2E_TMP/waiting"; then
  clean "the waiting message" "$E2E_TMP/waiting"
else
  check "the waiting message: no raw control character" no_raw_controls "$E2E_TMP/waiting"
fi

# syslog: a datagram socket that keeps what arrives, byte for byte.
start_bg sink python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "ab", buffering=0) as out:
    while True:
        out.write(s.recv(65536) + b"\n")' "$E2E_TMP/log.sock" "$E2E_TMP/syslog"
check "the syslog socket is up" wait_for 10 test -S "$E2E_TMP/log.sock"
DBLOCK_SYSLOG_SOCKET=$E2E_TMP/log.sock dblock --log syslog run "$k" -- true 2>/dev/null
check "a syslog line arrived" wait_for 10 grep -q "held by" "$E2E_TMP/syslog"
clean "syslog" "$E2E_TMP/syslog"

# Only SQLite stores bytes that are not UTF-8: JSON shows them as U+FFFD instead of failing.
if [ "$DBLOCK_TEST_BACKEND" = sqlite ]; then
  sqlite3 -cmd ".timeout 5000" "${DBLOCK_DSN#sqlite:}" \
    "UPDATE ${DBLOCK_TABLE_PREFIX}locks SET owner = CAST(X'6576ff696c' AS TEXT) WHERE name = '$k';
     UPDATE ${DBLOCK_TABLE_PREFIX}runs SET owner = CAST(X'6576ff696c' AS TEXT) WHERE name = '$k';"
  assert_eq "status --json: a byte that is not UTF-8 becomes U+FFFD" "ev�il" "$(status_field "$k" owner)"
  assert_eq "history --json: the same" "ev�il" "$(history_field "$k" runs.0.owner)"
fi

kill "$holder" 2>/dev/null
wait_exit _ "$holder"
finish

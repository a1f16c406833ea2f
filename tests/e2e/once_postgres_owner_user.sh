#!/usr/bin/env bash
# The default owner names the Unix user (dblock(1), run --owner: user@host:pid:random), so that
# where several users' jobs share one database on one machine, status and a skip line say whose
# job holds a key. Two users (daemon and nobody, through setpriv) share the test PostgreSQL: a
# server needs no shared file. An explicit --owner is stored as given.
# Needs root, to act as daemon and nobody.
source "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root, to act as daemon and nobody"
command -v setpriv >/dev/null || skip_or_fail "setpriv is needed"
dblock_bin=$(readlink -f "$DBLOCK_BIN")
host=$(hostname)

# as USER ARGS...: dblock as USER, with only PATH, the database and the table prefix.
as() {
  setpriv --reuid="$1" --regid="$(id -g "$1")" --clear-groups -- \
    env -i PATH=/usr/bin:/bin HOME=/nonexistent DBLOCK_DSN="$DBLOCK_DSN" DBLOCK_TABLE_PREFIX="$DBLOCK_TABLE_PREFIX" \
    "$dblock_bin" "${@:2}"
}

assert_status "init" 0 dblock init
k=$(key users)
start_bg holder setpriv --reuid=daemon --regid="$(id -g daemon)" --clear-groups -- \
  env -i PATH=/usr/bin:/bin HOME=/nonexistent DBLOCK_DSN="$DBLOCK_DSN" DBLOCK_TABLE_PREFIX="$DBLOCK_TABLE_PREFIX" \
  "$dblock_bin" run "$k" -- sleep 20 2>/dev/null
check "daemon's job holds $k" wait_for 10 is_held "$k"

owner=$(status_field "$k" owner)
case $owner in
  "daemon@$host:"[0-9]*:[0-9a-f]*) pass "the stored owner names the user: $owner" ;;
  *) fail "the stored owner '$owner' does not start with daemon@$host:" ;;
esac
dblock status "$k" >"$E2E_TMP/status"
check "status shows daemon's owner" grep -qF "daemon@$host:" "$E2E_TMP/status"

# nobody's job is skipped; its -v line says whose job holds the key.
as nobody -v run "$k" -- true 2>"$E2E_TMP/skip"
assert_eq "nobody's run is skipped" 75 $?
sed 's/^/    | /' "$E2E_TMP/skip"
check "the skip line names daemon" grep -q "'$k' is held by daemon@$host:[0-9]*:[0-9a-f]* on $host (pid" "$E2E_TMP/skip"
# root's skipped event (the journal's native protocol, as test_log_sinks.sh listens to it).
journal=$E2E_TMP/journal.jsonl
start_bg listener python3 "$DBLOCK_SOURCE_DIR/tests/e2e/journal_listener.py" "$E2E_TMP/journal.sock" "$journal"
check "the journal listener is up" wait_for 10 test -S "$E2E_TMP/journal.sock"
DBLOCK_JOURNAL_SOCKET=$E2E_TMP/journal.sock dblock --log journal run "$k" -- true 2>/dev/null
assert_eq "root's run is skipped" 75 $?
check "the skipped event names daemon" wait_for 10 grep -q "skipped '$k': held by daemon@$host:" "$journal"
check "its DBLOCK_HOLDER too" grep -q "\"DBLOCK_HOLDER\": \"daemon@$host:" "$journal"
kill -TERM "$holder"  # setpriv and env exec dblock: this is its pid
wait_exit rc "$holder"
check "daemon's job ended on SIGTERM ($rc)" test "$rc" != timeout

# An owner given is the holder's identity, stored as given.
k2=$(key given)
token=$(dblock acquire "$k2" --owner script-a)
assert_eq "--owner is stored as given" script-a "$(status_field "$k2" owner)"
assert_status "and released by it" 0 dblock release "$k2" --owner script-a
check "the acquire's own default owner names root" \
  eval 't=$(dblock acquire "$k2"); [[ $(status_field "$k2" owner) == root@$host:* ]]'
finish

#!/usr/bin/env bash
# A server that wants a password when none was given ("fe_sendauth: no password supplied",
# known by libpq's PQconnectionNeedsPassword): exit 78, and the message names where dblock and
# libpq look for one (--dsn-file, DBLOCK_DSN_FILE, the password file libpq read, with the line it
# would match), never the password. The line it names, written to that file, then works.
source "$(dirname "$0")/lib.sh"

password=$(sed -nE 's#^[a-z]+://[^:/@]*:([^@]*)@.*#\1#p' <<<"$DBLOCK_DSN")
[ -n "$password" ] || fail "the test DSN has no password to leave out"
nopw=$(sed -E 's#(://[^:/@]*):[^@]*@#\1@#' <<<"$DBLOCK_DSN")
home="$E2E_TMP/home"
mkdir -p "$home"
err="$E2E_TMP/err"
assert_status "init (with the password)" 0 dblock -q init
# Nothing of the machine's: no password file, no password in the environment.
pg() { env -u PGPASSFILE -u PGPASSWORD HOME="$home" "$@"; }

assert_status "no password: status exits 78" 78 pg dblock --dsn "$nopw" status
pg dblock --dsn "$nopw" status 2>"$err"
sed 's/^/    | /' "$err"
check "it says the server wants a password" grep -q "the server wants a password for user " "$err"
check "it names --dsn-file and DBLOCK_DSN_FILE" grep -q -- "--dsn-file or DBLOCK_DSN_FILE" "$err"
check "it names the password file libpq read" grep -qF "libpq's password file $home/.pgpass" "$err"
check "and PGPASSFILE" grep -q "PGPASSFILE" "$err"
check "the password is never shown" bash -c '! grep -qF -- "$1" "$2"' _ ":$password@" "$err"
line=$(grep -oE "add the line [^ ]+:PASSWORD" "$err" | sed 's/^add the line //')
check "it names the line to add ($line)" test -n "$line"

pg env PGPASSFILE="$E2E_TMP/other.pgpass" "$DBLOCK_BIN" --dsn "$nopw" status 2>"$err"
check "PGPASSFILE's file is the one named" grep -qF "libpq's password file $E2E_TMP/other.pgpass" "$err"

# The line as named, with the password, in the file as named: the same DSN connects.
printf '%s\n' "${line%PASSWORD}$password" >"$home/.pgpass"
chmod 0600 "$home/.pgpass"
pg dblock --dsn "$nopw" -q status "$(key none)" 2>"$err"
assert_eq "with that line in $home/.pgpass the DSN without a password works (1: free)" 1 $?
finish

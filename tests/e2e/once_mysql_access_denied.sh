#!/usr/bin/env bash
# A server that refuses the user (errno 1045): exit 78, and the message says where the password
# comes from (the DSN, kept in a --dsn-file or DBLOCK_DSN_FILE file; the [dblock] group of the
# option file), never the password. Put where it says, the password works.
source "$(dirname "$0")/lib.sh"

password=$(sed -nE 's#^[a-z]+://[^:/@]*:([^@]*)@.*#\1#p' <<<"$DBLOCK_DSN")
[ -n "$password" ] || fail "the test DSN has no password to leave out"
nopw=$(sed -E 's#(://[^:/@]*):[^@]*@#\1@#' <<<"$DBLOCK_DSN")
wrong=$(sed -E 's#(://[^:/@]*):[^@]*@#\1:not-the-password@#' <<<"$DBLOCK_DSN")
home="$E2E_TMP/home"
mkdir -p "$home"
err="$E2E_TMP/err"
assert_status "init (with the password)" 0 dblock -q init
my() { env -u MYSQL_PWD -u MARIADB_HOME -u MYSQL_HOME HOME="$home" "$@"; }

assert_status "no password: status exits 78" 78 my dblock --dsn "$nopw" status
my dblock --dsn "$nopw" status 2>"$err"
sed 's/^/    | /' "$err"
check "it is the server's refusal (errno 1045)" grep -q "(errno 1045)" "$err"
check "it says the DSN gives no password" grep -q "the DSN gives no password" "$err"
check "it names the [dblock] group of ~/.my.cnf" grep -qF "[dblock] group of ~/.my.cnf" "$err"
check "it names --dsn-file and DBLOCK_DSN_FILE" grep -q -- "--dsn-file or DBLOCK_DSN_FILE" "$err"

assert_status "a wrong password: status exits 78" 78 my dblock --dsn "$wrong" status
my dblock --dsn "$wrong" status 2>"$err"
sed 's/^/    | /' "$err"
check "it says the DSN's password was refused" grep -q "refused this user with the DSN's password" "$err"
check "and names --dsn-file and DBLOCK_DSN_FILE" grep -q -- "--dsn-file or DBLOCK_DSN_FILE" "$err"
check "the wrong password is never shown" bash -c '! grep -q "not-the-password" "$1"' _ "$err"

# As it says: the password in the [dblock] group of ~/.my.cnf.
printf '[dblock]\npassword=%s\n' "$password" >"$home/.my.cnf"
chmod 0600 "$home/.my.cnf"
my dblock --dsn "$nopw" -q status "$(key none)" 2>"$err"
assert_eq "with password= in [dblock] of ~/.my.cnf the DSN without one works (1: free)" 1 $?
check "the right password was never shown" bash -c '! grep -qF -- "$1" "$2"' _ "$password" "$err"
finish

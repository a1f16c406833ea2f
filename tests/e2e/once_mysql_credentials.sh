#!/usr/bin/env bash
# Credentials where operators keep them (man/dblock.1, DSN and FILES): an option file (the DSN's
# option-file, its [client] and [dblock] groups; ~/.my.cnf without one) and unix_socket
# authentication over the server's socket. An option file decides the server and the user, so it
# is trusted like a DSN file: one that others may write, or that belongs to another user, is
# refused (78) before a word of it is used; so is an option-file the DSN names that does not
# exist. An access-denied message names the systemd credential among the places for a password.
# unix_socket needs root (the account is made as the server's root; the client runs as nobody).
source "$(dirname "$0")/lib.sh"

mysql_client_options
password=$MYSQL_CLIENT_PWD
user=$(sed -nE 's#^[a-z]+://([^:/@]*)[:@].*#\1#p' <<<"$DBLOCK_DSN")
hostport=$(sed -nE 's#^[a-z]+://[^@]*@([^/]*)/.*#\1#p' <<<"$DBLOCK_DSN")
database=$(sed -nE 's#^[a-z]+://[^/]*/([^?]*).*#\1#p' <<<"$DBLOCK_DSN")
[ -n "$password" ] && [ -n "$user" ] && [ -n "$hostport" ] || fail "cannot split the test DSN"
home=$E2E_TMP/home
mkdir -p "$home"
my() { env -u DBLOCK_DSN -u MYSQL_HOME -u MARIADB_HOME HOME="$home" "$@"; }
ran() { [ "$(cat "$E2E_TMP/ran.$1" 2>/dev/null)" = yes ]; }

# 1. option-file: the user in [client], the password in [dblock] (the group dblock reads too).
cnf=$E2E_TMP/client.cnf
printf '[client]\nuser=%s\n[dblock]\npassword=%s\n' "$user" "$password" >"$cnf"
chmod 600 "$cnf"
nouser="mysql://$hostport/$database"
my dblock -d "$nouser?option-file=$cnf" run "$(key cnf)" -- sh -c "echo yes >'$E2E_TMP/ran.cnf'"
check "option-file: the command ran as [client]'s user with [dblock]'s password" ran cnf

# 2. An option file others may write, or another user's: refused, named, nothing ran.
chmod 620 "$cnf"
expect_line "a group-writable option-file" 78 \
  "dblock: '$(key w)': option file $cnf has mode 0620: users other than its owner may change it: refused (chmod go-w $cnf)" \
  my dblock -d "$nouser?option-file=$cnf" run "$(key w)" -- sh -c "echo yes >'$E2E_TMP/ran.w'"
check "and its command did not run" bash -c "! test -e '$E2E_TMP/ran.w'"
chmod 600 "$cnf"
if [ "$(id -u)" -eq 0 ]; then
  chown nobody "$cnf"
  assert_status "another user's option-file is refused" 78 my dblock -d "$nouser?option-file=$cnf" run "$(key o)" -- true
  chown 0 "$cnf"
fi
assert_status "an option-file that does not exist is refused, not ignored" 78 \
  my dblock -d "$nouser?option-file=$E2E_TMP/missing.cnf" run "$(key m)" -- true

# 3. Without option-file: ~/.my.cnf, trusted the same way.
printf '[dblock]\nuser=%s\npassword=%s\n' "$user" "$password" >"$home/.my.cnf"
chmod 600 "$home/.my.cnf"
my dblock -d "$nouser" run "$(key home)" -- sh -c "echo yes >'$E2E_TMP/ran.home'"
check "~/.my.cnf's [dblock] group: the command ran" ran home
chmod 666 "$home/.my.cnf"
assert_status "a world-writable ~/.my.cnf is refused" 78 my dblock -d "$nouser" run "$(key home2)" -- true
rm -f "$home/.my.cnf"

# 4. Access denied without a password: the systemd credential is among the places named.
my dblock -d "mysql://$user@$hostport/$database" status 2>"$E2E_TMP/err"
check "access denied names the systemd credential" \
  grep -qF 'dblock-dsn (LoadCredential=dblock-dsn:FILE, read from $CREDENTIALS_DIRECTORY)' "$E2E_TMP/err"

# 5. unix_socket authentication over the server's socket (scripts/test-servers.sh's state dir).
state_file=${DBLOCK_TEST_SERVERS_STATE:-/tmp/dblock-test-servers.state}
state_dir=$(cat "$state_file" 2>/dev/null)
grep -qxF "DBLOCK_TEST_MYSQL_DSN=$DBLOCK_DSN" "$state_dir/env" 2>/dev/null ||
  skip_or_fail "the server's state file $state_file is not this DSN's (export DBLOCK_TEST_SERVERS_STATE): its socket is unknown"
[ "$(id -u)" -eq 0 ] || skip_or_fail "unix_socket authentication needs root (the server's root account, a client run as nobody)"
command -v setpriv >/dev/null || skip_or_fail "setpriv is needed to run as nobody"
socket=$state_dir/mysql/mysqld.sock
admin() { mariadb --socket="$socket" -uroot -e "$1"; }
trap 'admin "DROP USER IF EXISTS nobody@localhost" >/dev/null 2>&1; e2e_cleanup' EXIT
admin "CREATE USER nobody@localhost IDENTIFIED VIA unix_socket; GRANT ALL ON $database.* TO nobody@localhost" ||
  fail "CREATE USER nobody IDENTIFIED VIA unix_socket"
chmod 0711 "$E2E_TMP"
socket_dsn="mysql://nobody@localhost/$database?socket=$socket"
setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups -- \
  env -u DBLOCK_DSN HOME=/nonexistent "$DBLOCK_BIN" -d "$socket_dsn" run "$(key sock)" -- sh -c 'id -un' >"$E2E_TMP/sock.out"
assert_eq "unix_socket: nobody ran the command, authenticated as the OS user, no password anywhere" nobody \
  "$(cat "$E2E_TMP/sock.out")"
assert_status "unix_socket: root claiming to be nobody is refused (78)" 78 my dblock -d "$socket_dsn" status
finish

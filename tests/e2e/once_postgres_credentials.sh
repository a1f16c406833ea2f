#!/usr/bin/env bash
# Credentials where operators keep them (man/dblock.1, DSN and ENVIRONMENT): libpq's password
# file (PGPASSFILE), service files (service= in the DSN, PGSERVICE, PGSERVICEFILE), the libpq
# environment (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD, PGOPTIONS), the server's Unix
# socket (host=/socket/dir) and peer authentication over it. A service file, like a DSN file, is
# refused (78) when others may write it. dblock leaves to libpq what the
# DSN leaves out: a service's or PGOPTIONS' options (here a search_path) are kept beside
# dblock's own session settings, not replaced by them. A server that wants a password the
# service did not give is told where to put one: the service's section among the places.
# Peer authentication needs root (pg_hba.conf belongs to postgres; the client runs as nobody):
# one pg_hba line for the role nobody, removed at the end.
source "$(dirname "$0")/lib.sh"

command -v psql >/dev/null || skip_or_fail "no psql to make a schema with"
password=$(sed -nE 's#^[a-z]+://[^:/@]*:([^@]*)@.*#\1#p' <<<"$DBLOCK_DSN")
user=$(sed -nE 's#^[a-z]+://([^:/@]*)[:@].*#\1#p' <<<"$DBLOCK_DSN")
hostport=$(sed -nE 's#^[a-z]+://[^@]*@([^/]*)/.*#\1#p' <<<"$DBLOCK_DSN")
host=${hostport%:*} port=${hostport##*:} database=$(sed -nE 's#^[a-z]+://[^/]*/([^?]*).*#\1#p' <<<"$DBLOCK_DSN")
[ -n "$password" ] && [ -n "$user" ] && [ -n "$port" ] || fail "cannot split the test DSN"
nopw="postgres://$user@$host:$port/$database"
home=$E2E_TMP/home
mkdir -p "$home"
# Nothing of the machine's libpq settings: only what each case gives.
pg() {
  env -u PGPASSFILE -u PGPASSWORD -u PGSERVICE -u PGSERVICEFILE -u PGHOST -u PGPORT -u PGUSER -u PGDATABASE \
    -u PGOPTIONS -u PGSYSCONFDIR -u DBLOCK_DSN HOME="$home" "$@"
}
ran() { [ "$(cat "$E2E_TMP/ran.$1" 2>/dev/null)" = yes ]; }
tables_in() { server_sql "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = '$1' AND c.relname LIKE '$2%' AND c.relkind = 'r'"; }

# 1. PGPASSFILE: a DSN without a password, the password in the file libpq reads.
printf '%s:%s:%s:%s:%s\n' "$host" "$port" "$database" "$user" "$password" >"$E2E_TMP/pgpass"
chmod 600 "$E2E_TMP/pgpass"
pg PGPASSFILE="$E2E_TMP/pgpass" dblock -d "$nopw" run "$(key pgpass)" -- sh -c "echo yes >'$E2E_TMP/ran.pgpass'"
check "PGPASSFILE: the command ran with the password file's password" ran pgpass

# 2. A service file: service= in the DSN, and PGSERVICE with an empty DSN; PGSERVICEFILE names it.
schema="${DBLOCK_TABLE_PREFIX}svc"
server_sql "CREATE SCHEMA $schema" >/dev/null || fail "CREATE SCHEMA $schema"
cat >"$E2E_TMP/pg_service.conf" <<EOF
[dblock_e2e]
host=$host
port=$port
dbname=$database
user=$user
password=$password
[dblock_e2e_path]
host=$host
port=$port
dbname=$database
user=$user
password=$password
options=-csearch_path=$schema
[dblock_e2e_nopw]
host=$host
port=$port
dbname=$database
user=$user
EOF
chmod 600 "$E2E_TMP/pg_service.conf"
svc() { pg PGSERVICEFILE="$E2E_TMP/pg_service.conf" "$@"; }
svc dblock -d 'postgres:///?service=dblock_e2e' run "$(key svc)" -- sh -c "echo yes >'$E2E_TMP/ran.svc'"
check "service= in the DSN: the command ran" ran svc
svc env PGSERVICE=dblock_e2e dblock -d 'postgres://' run "$(key pgservice)" -- sh -c "echo yes >'$E2E_TMP/ran.pgservice'"
check "PGSERVICE with postgres://: the command ran" ran pgservice
assert_status "status over the service connects (1: free)" 1 \
  svc dblock -d 'postgres:///?service=dblock_e2e' -q status "$(key none)"

expect_line "an unknown service is a configuration error" 78 \
  "dblock: cannot connect to postgres:///?service=dblock_e2e_none: definition of service \"dblock_e2e_none\" not found" \
  svc dblock -d 'postgres:///?service=dblock_e2e_none' status

# A service file others may write (it names the server and the user) is refused like a DSN file.
chmod 620 "$E2E_TMP/pg_service.conf"
expect_line "a group-writable service file" 78 \
  "dblock: '$(key svcw)': service file $E2E_TMP/pg_service.conf has mode 0620: users other than its owner may change it: refused (chmod go-w $E2E_TMP/pg_service.conf)" \
  svc dblock -d 'postgres:///?service=dblock_e2e' run "$(key svcw)" -- sh -c "echo yes >'$E2E_TMP/ran.svcw'"
check "and its command did not run" bash -c "! test -e '$E2E_TMP/ran.svcw'"
chmod 600 "$E2E_TMP/pg_service.conf"

# 3. The service's options (a search_path): the tables go where the service says.
prefix2="${DBLOCK_TABLE_PREFIX}p2_"
svc dblock -d 'postgres:///?service=dblock_e2e_path' --table-prefix "$prefix2" run "$(key svcpath)" -- true
check "the service's search_path is kept: the tables are in $schema" test "$(tables_in "$schema" "$prefix2")" -gt 0
assert_eq "and none in public" 0 "$(tables_in public "$prefix2")"

# 4. PGOPTIONS, with the DSN's password: the same.
prefix3="${DBLOCK_TABLE_PREFIX}p3_"
pg PGOPTIONS="-csearch_path=$schema" dblock -d "$DBLOCK_DSN" --table-prefix "$prefix3" run "$(key pgoptions)" -- true
check "PGOPTIONS' search_path is kept: the tables are in $schema" test "$(tables_in "$schema" "$prefix3")" -gt 0
assert_eq "and none in public" 0 "$(tables_in public "$prefix3")"

# 5. The libpq environment alone, with postgres:// as the DSN.
pg PGHOST="$host" PGPORT="$port" PGUSER="$user" PGPASSWORD="$password" PGDATABASE="$database" \
  dblock -d 'postgres://' run "$(key env)" -- sh -c "echo yes >'$E2E_TMP/ran.env'"
check "PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE: the command ran" ran env

# 6. A service without a password: exit 78, and the message names the service's section and
#    the systemd credential among the places for one, never the password.
assert_status "a service without a password: 78" 78 svc dblock -d 'postgres:///?service=dblock_e2e_nopw' status
svc dblock -d 'postgres:///?service=dblock_e2e_nopw' status 2>"$E2E_TMP/err"
sed 's/^/    | /' "$E2E_TMP/err"
check "it names the service's section" grep -qF "in the [dblock_e2e_nopw] section of the service file" "$E2E_TMP/err"
check "it names the systemd credential" grep -qF 'dblock-dsn (LoadCredential=dblock-dsn:FILE, read from $CREDENTIALS_DIRECTORY)' "$E2E_TMP/err"
check "the password is never shown" bash -c '! grep -qF -- "$1" "$2"' _ "$password" "$E2E_TMP/err"

# 7. The server's Unix socket, and peer authentication over it. The socket directory is the
#    server's state directory (scripts/test-servers.sh).
state_file=${DBLOCK_TEST_SERVERS_STATE:-/tmp/dblock-test-servers.state}
state_dir=$(cat "$state_file" 2>/dev/null)
if ! grep -qxF "DBLOCK_TEST_POSTGRES_DSN=$DBLOCK_DSN" "$state_dir/env" 2>/dev/null; then
  skip_or_fail "the server's state file $state_file is not this DSN's (export DBLOCK_TEST_SERVERS_STATE): its socket is unknown"
fi
socket_dir=$state_dir/pg
pg PGPASSWORD="$password" dblock -d "postgres:///$database?host=$socket_dir&port=$port&user=$user" \
  run "$(key socket)" -- sh -c "echo yes >'$E2E_TMP/ran.socket'"
check "host=/socket/dir: the command ran over the Unix socket" ran socket

[ "$(id -u)" -eq 0 ] || skip_or_fail "peer authentication needs root (pg_hba.conf, and a client run as nobody)"
command -v setpriv >/dev/null || skip_or_fail "setpriv is needed to run as nobody"
hba=$socket_dir/data/pg_hba.conf
marker="# dblock-e2e-peer-$$"
admin() { psql "$DBLOCK_DSN" -X -q -v ON_ERROR_STOP=1 -c "$1"; }
restore_peer() {
  sed -i "/$marker\$/d" "$hba" 2>/dev/null
  admin "SELECT pg_reload_conf()" >/dev/null 2>&1
  admin "DROP OWNED BY nobody; DROP ROLE IF EXISTS nobody" >/dev/null 2>&1
}
trap 'restore_peer; e2e_cleanup' EXIT
admin "CREATE ROLE nobody LOGIN; GRANT ALL ON SCHEMA public TO nobody" || fail "CREATE ROLE nobody"
# First match wins: this line before the trust lines, for the role nobody only.
sed -i "1i local $database nobody peer $marker" "$hba"
admin "SELECT pg_reload_conf()" >/dev/null || fail "pg_reload_conf"
chmod 0711 "$E2E_TMP"
peer_dsn="postgres:///$database?host=$socket_dir&port=$port"
setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups -- \
  env -u DBLOCK_DSN -u PGUSER -u PGPASSWORD HOME=/nonexistent "$DBLOCK_BIN" -d "$peer_dsn" \
  --table-prefix "${DBLOCK_TABLE_PREFIX}peer_" run "$(key peer)" -- sh -c 'id -un' >"$E2E_TMP/peer.out"
assert_eq "peer: nobody ran the command, authenticated as the OS user, no password anywhere" nobody "$(cat "$E2E_TMP/peer.out")"
check "peer: the tables belong to the role nobody" test \
  "$(server_sql "SELECT count(*) FROM pg_tables WHERE tablename LIKE '${DBLOCK_TABLE_PREFIX}peer_%' AND tableowner = 'nobody'")" -gt 0
assert_status "peer: root claiming to be nobody is refused (78)" 78 \
  pg dblock -d "$peer_dsn&user=nobody" --table-prefix "${DBLOCK_TABLE_PREFIX}peer_" status
finish

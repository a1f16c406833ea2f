#!/usr/bin/env bash
# Starts (or stops) throwaway MariaDB and PostgreSQL servers on 127.0.0.1, on free ports,
# with their data in a temp dir, and a PgBouncer (transaction and session pooling) in front of
# that PostgreSQL, and prints their DSNs as shell assignments:
#   eval "$(scripts/test-servers.sh start)"   # sets DBLOCK_TEST_MYSQL_DSN, DBLOCK_TEST_POSTGRES_DSN,
#                             # DBLOCK_TEST_PGBOUNCER_DSN (transaction pooling), ..._SESSION_DSN,
#                             # DBLOCK_TEST_MYSQL_TLS_DSN, DBLOCK_TEST_POSTGRES_TLS_DSN, DBLOCK_TEST_TLS_DIR
#   scripts/test-servers.sh stop
# For fault tests, one of the running servers can be taken down and brought back on the same
# port and data dir (start-server and restart return once it accepts connections again):
#   scripts/test-servers.sh stop-server mysql|postgres
#   scripts/test-servers.sh start-server mysql|postgres
#   scripts/test-servers.sh restart mysql|postgres SECONDS_DOWN
# Every verb finds the servers through the state file (DBLOCK_TEST_SERVERS_STATE).
# Must run as root (the servers run as the mysql and postgres users). The test user is a
# superuser of these throwaway servers, so tests can change server settings and kill sessions.
# Both servers also speak TLS, with a CA and certificates made here (make_certs): a second user,
# dblock_tls, may log in only over TLS with a client certificate the CA signed, and its DSNs
# verify the server's certificate and host name (ssl-mode=VERIFY_IDENTITY, sslmode=verify-full).
# The plain DSNs are unchanged (PostgreSQL's default sslmode=prefer now gets TLS on them).
set -euo pipefail

# mariadbd and mariadb-install-db live in /usr/sbin, which a non-login PATH may lack.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

state_file=${DBLOCK_TEST_SERVERS_STATE:-/tmp/dblock-test-servers.state}
# Fixed ports instead of free ones (a port nothing may bind, e.g. 99999, shows what a failed
# start looks like).
mysql_port=${DBLOCK_TEST_MYSQL_PORT:-}
postgres_port=${DBLOCK_TEST_POSTGRES_PORT:-}
# max_connections of both servers (default 500 for MariaDB, 300 for PostgreSQL; restarts keep
# it); the start-storm bench uses 40, where a storm of contenders runs out of connections.
max_connections=${DBLOCK_TEST_MAX_CONNECTIONS:-}
password=dblock-test-pw
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)

. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/ports.sh"

# show_log NAME FILE: the end of a server's log on stderr, for a start that failed.
show_log() {
  echo "test-servers.sh: $1 did not start; the end of its log ($2):" >&2
  tail -n 40 "$2" >&2 2>/dev/null || echo "  (no log at $2)" >&2
}

wait_until() {  # wait_until SECONDS COMMAND...: polls until COMMAND succeeds
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge "$deadline" ]; then return 1; fi
    sleep 0.2
  done
}

# make_certs DIR: a CA, a server certificate for 127.0.0.1 (the only name the servers are
# reached by) and a client certificate for the user dblock_tls, in DIR/tls (CA.key stays there
# for tests that sign more). EC keys: made in milliseconds.
make_certs() {
  local t=$1/tls
  mkdir -p "$t"
  (
    cd "$t"
    ec() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
    ec ca.key && ec server.key && ec client.key
    openssl req -x509 -new -key ca.key -subj "/CN=dblock test CA" -days 30 -out ca.crt 2>/dev/null
    sign() {  # sign NAME SUBJECT EXTENSIONS
      openssl req -new -key "$1.key" -subj "$2" 2>/dev/null |
        openssl x509 -req -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -out "$1.crt" \
          -extfile <(printf '%s\n' "$3") 2>/dev/null
    }
    sign server "/CN=127.0.0.1" "subjectAltName=IP:127.0.0.1"
    sign client "/CN=dblock_tls" "extendedKeyUsage=clientAuth"
    chmod 644 ./*.crt
    chmod 600 ./*.key
    # Each server reads its own copy of the server key, which must be its own and private.
    for u in mysql postgres; do
      install -m 600 -o "$u" -g "$u" server.key "server-$u.key"
    done
  ) || { echo "test-servers.sh: openssl could not make the test certificates in $t" >&2; return 1; }
}

# launch_mariadb DIR PORT: runs mariadbd on an initialised data dir; returns once it answers.
launch_mariadb() {
  local dir=$1 port=$2
  # setsid: the server must not share the caller's process group (a test's cleanup kills that).
  # What mariadbd prints before its error log is open (a bad option, a missing binary) goes
  # into the error log too; the file belongs to mysql, which the server writes it as.
  touch "$dir/error.log"
  chown mysql:mysql "$dir/error.log"
  setsid mariadbd --user=mysql --datadir="$dir/data" --socket="$dir/mysqld.sock" --port="$port" \
    --bind-address=127.0.0.1 --pid-file="$dir/mysqld.pid" --log-error="$dir/error.log" \
    --skip-name-resolve --ssl-ca="$dir/../tls/ca.crt" --ssl-cert="$dir/../tls/server.crt" \
    --ssl-key="$dir/../tls/server-mysql.key" --innodb-buffer-pool-size=64M --max-connections="$(cat "$dir/max_connections" 2>/dev/null || echo 500)" >>"$dir/error.log" 2>&1 </dev/null &
  local pid=$! deadline=$((SECONDS + 60))
  # Until it answers; a server that exited will not, so stop waiting at once.
  until mariadb-admin --socket="$dir/mysqld.sock" -uroot ping >/dev/null 2>&1; do
    if ! kill -0 "$pid" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
      show_log MariaDB "$dir/error.log"
      return 1
    fi
    sleep 0.2
  done
}

# stop_mariadb DIR: shuts the server down (connections are dropped) and waits until it is gone.
stop_mariadb() {
  local dir=$1 pid
  [ -f "$dir/mysqld.pid" ] || return 0
  pid=$(cat "$dir/mysqld.pid")
  kill "$pid" 2>/dev/null || true
  wait_until 30 bash -c "! kill -0 $pid 2>/dev/null"
}

# launch_postgres DIR PORT: starts the server on an initialised data dir; returns once it answers.
launch_postgres() {
  local dir=$1 port=$2
  # pg_stat_statements lets the benchmarks count statements per run. pg_ctl puts the
  # server in a session of its own.
  runuser -u postgres -- "$pg_bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c ssl=on -c ssl_ca_file=$dir/../tls/ca.crt -c ssl_cert_file=$dir/../tls/server.crt -c ssl_key_file=$dir/../tls/server-postgres.key -c max_connections=$(cat "$dir/max_connections" 2>/dev/null || echo 300) -c shared_preload_libraries=pg_stat_statements" \
    start >/dev/null </dev/null || { show_log PostgreSQL "$dir/server.log"; return 1; }
}

start_mariadb() {
  local dir=$1/mysql port
  port=${mysql_port:-$(free_port)}
  mkdir -p "$dir"
  chown mysql:mysql "$dir"
  mariadb-install-db --user=mysql --datadir="$dir/data" --auth-root-authentication-method=socket \
    --skip-test-db >"$dir/install.log" 2>&1 || { cat "$dir/install.log" >&2; return 1; }
  echo "$port" >"$dir/port"
  echo "${max_connections:-500}" >"$dir/max_connections"  # a restart keeps it
  launch_mariadb "$dir" "$port" || return 1
  if ! mariadb --socket="$dir/mysqld.sock" -uroot <<SQL
CREATE DATABASE dblock_test;
CREATE USER 'dblock'@'127.0.0.1' IDENTIFIED BY '$password';
GRANT ALL PRIVILEGES ON *.* TO 'dblock'@'127.0.0.1' WITH GRANT OPTION;
CREATE USER 'dblock_tls'@'127.0.0.1' IDENTIFIED BY '$password' REQUIRE X509;
GRANT ALL PRIVILEGES ON *.* TO 'dblock_tls'@'127.0.0.1';
SQL
  then
    show_log MariaDB "$dir/error.log"
    return 1
  fi
  echo "DBLOCK_TEST_MYSQL_DSN=mysql://dblock:$password@127.0.0.1:$port/dblock_test" >>"$1/env"
  local t=$1/tls
  echo "DBLOCK_TEST_MYSQL_TLS_DSN=mysql://dblock_tls:$password@127.0.0.1:$port/dblock_test?ssl-mode=VERIFY_IDENTITY&ssl-ca=$t/ca.crt&ssl-cert=$t/client.crt&ssl-key=$t/client.key" >>"$1/env"
}

start_postgres() {
  local dir=$1/pg port
  port=${postgres_port:-$(free_port)}
  mkdir -p "$dir"
  chown postgres:postgres "$dir"
  runuser -u postgres -- "$pg_bin/initdb" -D "$dir/data" -U postgres --auth-local=trust --auth-host=scram-sha-256 >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; return 1; }
  echo "$port" >"$dir/port"
  echo "${max_connections:-300}" >"$dir/max_connections"
  # dblock_tls: over TLS only, with a client certificate whose CN is its name, and its password.
  { printf 'hostssl all dblock_tls 127.0.0.1/32 scram-sha-256 clientcert=verify-full\n'
    printf 'host all dblock_tls 0.0.0.0/0 reject\n'
    cat "$dir/data/pg_hba.conf"; } >"$dir/pg_hba.new"
  install -m 600 -o postgres -g postgres "$dir/pg_hba.new" "$dir/data/pg_hba.conf"
  rm -f "$dir/pg_hba.new"
  launch_postgres "$dir" "$port" || return 1
  if ! runuser -u postgres -- "$pg_bin/psql" -h "$dir" -p "$port" -U postgres -v ON_ERROR_STOP=1 -q <<SQL
CREATE ROLE dblock LOGIN SUPERUSER PASSWORD '$password';
CREATE ROLE dblock_tls LOGIN SUPERUSER PASSWORD '$password';
CREATE DATABASE dblock_test OWNER dblock;
SQL
  then
    show_log PostgreSQL "$dir/server.log"
    return 1
  fi
  echo "DBLOCK_TEST_POSTGRES_DSN=postgres://dblock:$password@127.0.0.1:$port/dblock_test" >>"$1/env"
  local t=$1/tls
  echo "DBLOCK_TEST_POSTGRES_TLS_DSN=postgres://dblock_tls:$password@127.0.0.1:$port/dblock_test?sslmode=verify-full&sslrootcert=$t/ca.crt&sslcert=$t/client.crt&sslkey=$t/client.key" >>"$1/env"
}

# start_pgbouncer DIR: PgBouncer in front of the PostgreSQL of DIR, its database dblock_test in
# transaction pooling (what README says only lease survives) and the same database as
# dblock_session in session pooling. Pools are small: a test's clients outnumber the server
# sessions. It must not run as root; `options` (the startup parameter that carries dblock's
# session settings) is ignored, as PgBouncer 1.18 refuses a client that sends it otherwise.
start_pgbouncer() {
  local dir=$1/pgbouncer port pg_port
  port=$(free_port)
  pg_port=$(cat "$1/pg/port")
  mkdir -p "$dir"
  printf '"dblock" "%s"\n' "$password" >"$dir/userlist.txt"
  cat >"$dir/pgbouncer.ini" <<INI
[databases]
dblock_test = host=127.0.0.1 port=$pg_port dbname=dblock_test pool_mode=transaction
dblock_session = host=127.0.0.1 port=$pg_port dbname=dblock_test pool_mode=session
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = scram-sha-256
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = 3
max_client_conn = 200
ignore_startup_parameters = options
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
  chown -R postgres:postgres "$dir"
  chmod 600 "$dir/userlist.txt"
  echo "$port" >"$dir/port"
  runuser -u postgres -- pgbouncer -d "$dir/pgbouncer.ini" >>"$dir/start.log" 2>&1 </dev/null ||
    { show_log PgBouncer "$dir/start.log"; return 1; }
  if ! wait_until 30 env PGPASSWORD="$password" "$pg_bin/psql" -h 127.0.0.1 -p "$port" -U dblock -d dblock_test -Atc 'SELECT 1'; then
    show_log PgBouncer "$dir/pgbouncer.log"
    return 1
  fi
  echo "DBLOCK_TEST_PGBOUNCER_DSN=postgres://dblock:$password@127.0.0.1:$port/dblock_test" >>"$1/env"
  echo "DBLOCK_TEST_PGBOUNCER_SESSION_DSN=postgres://dblock:$password@127.0.0.1:$port/dblock_session" >>"$1/env"
}

# export_lines FILE: its NAME=VALUE lines as exports for eval, a value quoted where the shell
# needs it (a TLS DSN's '&' and '?'); the plain DSNs print as they always did.
export_lines() {
  local name value
  while IFS='=' read -r name value; do printf 'export %s=%q\n' "$name" "$value"; done <"$1"
}

stop_all() {
  [ -f "$state_file" ] || return 0
  local dir
  dir=$(cat "$state_file")
  if [ -f "$dir/pgbouncer/pgbouncer.pid" ]; then
    local pid
    pid=$(cat "$dir/pgbouncer/pgbouncer.pid")  # it removes the file as it exits
    kill "$pid" 2>/dev/null || true
    wait_until 30 bash -c "! kill -0 $pid 2>/dev/null" || true
  fi
  if [ -f "$dir/mysql/mysqld.pid" ]; then
    kill "$(cat "$dir/mysql/mysqld.pid")" 2>/dev/null || true
    wait_until 30 bash -c "! kill -0 $(cat "$dir/mysql/mysqld.pid") 2>/dev/null" || true
  fi
  if [ -f "$dir/pg/data/postmaster.pid" ]; then
    runuser -u postgres -- "$pg_bin/pg_ctl" -D "$dir/pg/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir" "$state_file"
}

# server_dir mysql|postgres: the running server's dir under the state file's temp dir.
server_dir() {
  [ -f "$state_file" ] || { echo "test-servers.sh: no servers (no state file $state_file)" >&2; return 1; }
  local dir
  dir=$(cat "$state_file")
  case "$1" in
    mysql | mariadb) dir=$dir/mysql ;;
    postgres | postgresql) dir=$dir/pg ;;
    *) echo "test-servers.sh: unknown server '$1' (mysql or postgres)" >&2; return 64 ;;
  esac
  [ -f "$dir/port" ] || { echo "test-servers.sh: no $1 server in $(dirname "$dir")" >&2; return 1; }
  echo "$dir"
}

stop_server() {
  local dir
  dir=$(server_dir "$1") || return
  case "$1" in
    mysql | mariadb) stop_mariadb "$dir" ;;
    *) runuser -u postgres -- "$pg_bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null ;;
  esac
}

# Starting a server that already runs does nothing, so a test's cleanup may always call it.
start_server() {
  local dir
  dir=$(server_dir "$1") || return
  case "$1" in
    mysql | mariadb)
      mariadb-admin --socket="$dir/mysqld.sock" -uroot ping >/dev/null 2>&1 || launch_mariadb "$dir" "$(cat "$dir/port")"
      ;;
    *)
      runuser -u postgres -- "$pg_bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1 || launch_postgres "$dir" "$(cat "$dir/port")"
      ;;
  esac
}

case "${1:-}" in
  start)
    [ "$(id -u)" -eq 0 ] || { echo "test-servers.sh: run as root" >&2; exit 1; }
    stop_all
    dir=$(mktemp -d /tmp/dblock-test-servers.XXXXXX)
    chmod 755 "$dir"
    echo "$dir" >"$state_file"
    make_certs "$dir" || { stop_all; exit 1; }
    echo "DBLOCK_TEST_TLS_DIR=$dir/tls" >>"$dir/env"
    start_mariadb "$dir" || { stop_all; exit 1; }
    start_postgres "$dir" || { stop_all; exit 1; }
    start_pgbouncer "$dir" || { stop_all; exit 1; }
    export_lines "$dir/env"
    ;;
  stop)
    stop_all
    ;;
  env)
    [ -f "$state_file" ] && export_lines "$(cat "$state_file")/env"
    ;;
  stop-server | start-server)
    [ $# -eq 2 ] || { echo "usage: $0 $1 mysql|postgres" >&2; exit 64; }
    "${1/-/_}" "$2"
    ;;
  restart)
    [ $# -eq 3 ] && [[ $3 =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "usage: $0 restart mysql|postgres SECONDS_DOWN" >&2; exit 64; }
    stop_server "$2"
    sleep "$3"
    start_server "$2"
    ;;
  *)
    echo "usage: $0 start|stop|env|stop-server SERVER|start-server SERVER|restart SERVER SECONDS_DOWN" >&2
    exit 64
    ;;
esac

#!/usr/bin/env bash
# Starts (or stops) a throwaway database cluster on 127.0.0.1, on free ports, with its data in a
# temp dir, for the failover tests (tests/cluster/), and prints its DSNs as shell assignments:
#   scripts/test-cluster.sh start [pg-async|pg-sync|galera]   (default pg-async)
#     pg-async, pg-sync: Debian's patroni over a one-member etcd and two PostgreSQL members
#       (pg1, pg2); pg-sync sets Patroni's `synchronous_mode: true`. Each member advertises a
#       freezable proxy (tests/faults/proxy.py) in front of its port as its connect_address, so
#       the replica's primary_conninfo (which Patroni builds from the leader's connect_address)
#       goes through the proxy of the leader: freeze-replication cuts replication there.
#       DBLOCK_TEST_CLUSTER_PG_DSN is a libpq multi-host DSN of both members with
#       target_session_attrs=read-write, so a client always reaches the leader.
#     galera: a three-node MariaDB Galera cluster (galera-4, rsync SST), nodes 1, 2, 3.
#   scripts/test-cluster.sh stop          stops everything it started, removes the temp dir
#   scripts/test-cluster.sh env           the assignments again
# start prints DBLOCK_TEST_CLUSTER_STATE among its assignments (eval them): the state file that
# names its cluster, which every other verb needs (stop included).
# Fault helpers (each returns once the cluster is in the state it names):
#   leader                      the Patroni leader's name (pg1 or pg2)
#   kill-leader                 SIGKILL of the leader's postmaster, its Patroni and every process
#                               of that instance (a crashed node); prints the dead leader's name
#   wait-leader [SECONDS]       waits for a leader that accepts writes; prints its name
#   kill-member NAME            as kill-leader, for a named member
#   start-member NAME           starts a killed member's Patroni again (it rejoins as a replica)
#   wait-replica [SECONDS]      waits until the replica has replayed all the leader wrote
#   freeze-replication / thaw-replication
#                               freezes (thaws) the proxy in front of the current leader
#   kill-node N / start-node N  Galera: SIGKILL of node N's mariadbd / starts it again (rejoins)
#   restart                     the whole cluster down (all members) and up again
# Every verb finds the cluster through the state file (DBLOCK_TEST_CLUSTER_STATE). One cluster
# per state file: start without one makes a state file of its own, so two invocations (two
# users, two tests) never share a cluster, and start never stops a cluster: given a state file
# that already names one, it refuses. No verb falls back to a default state file, which could
# name someone else's cluster.
# Must run as root (PostgreSQL and Patroni run as postgres, MariaDB as mysql). It only binds
# 127.0.0.1 and only ever signals processes it started (found through its own temp dir).
set -euo pipefail
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

state_file=${DBLOCK_TEST_CLUSTER_STATE:-}
# Where versions before per-invocation state kept it; only named in a hint, never acted on.
legacy_state=/tmp/dblock-test-cluster.state
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
proxy=$here/../tests/faults/proxy.py
password=dblock-test-pw
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
galera_lib=/usr/lib/galera/libgalera_smm.so
# Patroni's timings: a dead leader's key expires after ttl seconds; loop_wait + 2 * retry_timeout
# must stay within ttl.
patroni_ttl=${DBLOCK_TEST_PATRONI_TTL:-10}

say() { echo "test-cluster.sh: $*" >&2; }

. "$here/lib/ports.sh"

wait_until() {  # wait_until SECONDS COMMAND...: polls until COMMAND succeeds
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge "$deadline" ]; then return 1; fi
    sleep 0.2
  done
}

show_log() {  # show_log WHAT FILE
  say "$1; the end of its log ($2):"
  tail -n 30 "$2" >&2 2>/dev/null || echo "  (no log at $2)" >&2
}

alive() { [ -e "/proc/$1" ] && [ "$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null)" != Z ]; }
all_gone() {  # all_gone PID...: none of them is alive
  local p
  for p in "$@"; do alive "$p" && return 1; done
  return 0
}

# ours DIR: pids of the live processes whose command line or working directory names DIR (the
# cluster's temp dir): every process this script started, and what those started (postgres
# backends, rsync SST daemons), never anything else.
ours() {
  python3 - "$1" <<'PY'
import os, sys
top, me = sys.argv[1], os.getpid()
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        continue
    if int(pid) != me and state != "Z" and (top in cmd or cwd == top or cwd.startswith(top + "/")):
        print(pid)
PY
}
none_ours() { [ -z "$(ours "$1")" ]; }

# children PID: the live child pids of PID.
children() {
  local p
  for p in /proc/[0-9]*/stat; do
    read -r line 2>/dev/null <"$p" || continue
    read -r _st ppid _ <<<"${line##*) }"
    [ "$ppid" = "$1" ] && echo "${p//[^0-9]/}"
  done
  return 0
}

# stop_pid PID SECONDS: SIGTERM, and SIGKILL if it still runs after SECONDS.
stop_pid() {
  alive "$1" || return 0
  kill "$1" 2>/dev/null || true
  wait_until "$2" all_gone "$1" && return 0
  kill -9 "$1" 2>/dev/null || true
  wait_until 10 all_gone "$1" || true
}

# need_state VERB: exits unless a state file is named (start's assignments export it).
need_state() {
  [ -n "$state_file" ] && return 0
  say "$1: which cluster? Set DBLOCK_TEST_CLUSTER_STATE to the state file its start printed (eval start's output)"
  [ -f "$legacy_state" ] && say "an older test-cluster.sh left $legacy_state: DBLOCK_TEST_CLUSTER_STATE=$legacy_state $0 $1"
  exit 1
}

cluster_dir() {
  [ -f "$state_file" ] || { say "no cluster (no state file $state_file)"; return 1; }
  cat "$state_file"
}

# launch DIR NAME USER COMMAND...: runs COMMAND in a session of its own as USER, output in
# DIR/NAME.log; its pid in DIR/NAME.pid (setsid and setpriv exec, so the pid is COMMAND's).
launch() {
  local dir=$1 name=$2 user=$3
  shift 3
  touch "$dir/$name.log"
  chown "$user:" "$dir/$name.log"
  if [ "$user" = root ]; then
    setsid "$@" >>"$dir/$name.log" 2>&1 </dev/null &
  else
    HOME=$dir setsid setpriv --reuid="$user" --regid="$user" --init-groups "$@" >>"$dir/$name.log" 2>&1 </dev/null &
  fi
  echo $! >"$dir/$name.pid"
}

# ---------------------------------------------------------------- etcd, Patroni, PostgreSQL

start_etcd() {
  local dir=$1/etcd client peer
  client=$(free_port)
  peer=$(free_port)
  mkdir -p "$dir"
  launch "$dir" etcd root etcd --name e1 --data-dir "$dir/data" \
    --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "e1=http://127.0.0.1:$peer" --initial-cluster-state new
  echo "$client" >"$dir/port"
  wait_until 30 python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$client/health', timeout=2)" ||
    { show_log "etcd did not start" "$dir/etcd.log"; return 1; }
  echo "DBLOCK_TEST_CLUSTER_ETCD_PORT=$client" >>"$1/env"
}

# rest_code PORT PATH: the HTTP status of a GET on a Patroni REST API (000: no answer).
rest_code() {
  python3 - "$1" "$2" <<'PY'
import sys, urllib.request, urllib.error
try:
    print(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}{sys.argv[2]}", timeout=2).status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception:
    print("000")
PY
}
rest_is() { [ "$(rest_code "$1" "$2")" = "${3:-200}" ]; }

member_var() { sed -n "s/^DBLOCK_TEST_CLUSTER_${1^^}_$2=//p" "$(cluster_dir)/env"; }

# pg_sql PORT SQL: one statement as postgres over the member's socket, rows unaligned.
pg_sql() {
  local dir
  dir=$(cluster_dir)
  local name
  for name in pg1 pg2; do
    if [ "$(cat "$dir/$name/port")" = "$1" ]; then
      runuser -u postgres -- "$pg_bin/psql" -h "$dir/$name" -p "$1" -U postgres -d postgres -X -q -A -t \
        -v ON_ERROR_STOP=1 -c "$2"
      return
    fi
  done
  return 1
}

has_test_db() { [ "$(pg_sql "$1" "SELECT count(*) FROM pg_database WHERE datname = 'dblock_test'")" = 1 ]; }

write_patroni_config() {  # write_patroni_config DIR NAME MODE
  local top=$1 name=$2 mode=$3 dir=$1/$2 sync=false
  [ "$mode" = pg-sync ] && sync=true
  cat >"$dir/patroni.yml" <<YAML
scope: dblock-test
name: $name
log:
  level: INFO
restapi:
  listen: 127.0.0.1:$(cat "$dir/rest_port")
  connect_address: 127.0.0.1:$(cat "$dir/rest_port")
etcd3:
  hosts: 127.0.0.1:$(cat "$top/etcd/port")
bootstrap:
  dcs:
    ttl: $patroni_ttl
    loop_wait: 1
    retry_timeout: $(((patroni_ttl - 1) / 2))
    maximum_lag_on_failover: 1048576
    synchronous_mode: $sync
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        max_connections: 200
        wal_log_hints: 'on'
        max_wal_senders: 5
        max_replication_slots: 5
        wal_keep_size: 64MB
  initdb:
    - encoding: UTF8
    - auth-local: trust
    - auth-host: scram-sha-256
postgresql:
  listen: 127.0.0.1:$(cat "$dir/port")
  connect_address: 127.0.0.1:$(cat "$dir/proxy_port")
  data_dir: $dir/data
  bin_dir: $pg_bin
  pgpass: $dir/pgpass
  pg_hba:
    - local all all trust
    - host replication replicator 127.0.0.1/32 scram-sha-256
    - host all all 127.0.0.1/32 scram-sha-256
  authentication:
    superuser: {username: postgres, password: '$password'}
    replication: {username: replicator, password: '$password'}
    rewind: {username: postgres, password: '$password'}
  parameters:
    unix_socket_directories: '$dir'
YAML
  chown postgres: "$dir/patroni.yml"
}

start_proxy() {  # start_proxy DIR: the proxy from a free port to DIR's PostgreSQL port
  local dir=$1
  launch "$dir" proxy root python3 "$proxy" --target-port "$(cat "$dir/port")" \
    --port-file "$dir/proxy_port" --state-file "$dir/proxy_state" --lifetime 86400
  wait_until 10 test -s "$dir/proxy_port" || { show_log "the proxy did not start" "$dir/proxy.log"; return 1; }
}

start_patroni() {  # start_patroni DIR NAME
  launch "$1/$2" patroni postgres patroni "$1/$2/patroni.yml"
}

# wait_role NAME ROLE SECONDS: until the member's REST API says it is ROLE (primary, replica, sync).
# A member whose Patroni exited will not become anything: stop waiting at once.
wait_role() {
  local dir deadline=$((SECONDS + $3))
  dir=$(cluster_dir)
  until rest_is "$(cat "$dir/$1/rest_port")" "/$2"; do
    if ! alive "$(cat "$dir/$1/patroni.pid")" || [ $SECONDS -ge $deadline ]; then
      show_log "$1 is not $2 (within $3 s)" "$dir/$1/patroni.log"
      return 1
    fi
    sleep 0.2
  done
}

start_pg_cluster() {  # start_pg_cluster DIR MODE
  local top=$1 mode=$2 name
  start_etcd "$top" || return 1
  for name in pg1 pg2; do
    mkdir -p "$top/$name"
    free_port >"$top/$name/port"
    free_port >"$top/$name/rest_port"
    start_proxy "$top/$name" || return 1
    chown -R postgres: "$top/$name"
    write_patroni_config "$top" "$name" "$mode"
  done
  start_patroni "$top" pg1
  wait_role pg1 primary 90 || return 1
  start_patroni "$top" pg2
  wait_role pg2 replica 120 || return 1
  if [ "$mode" = pg-sync ]; then wait_role pg2 sync 60 || return 1; fi
  pg_sql "$(cat "$top/pg1/port")" "CREATE ROLE dblock LOGIN SUPERUSER PASSWORD '$password'" >/dev/null &&
    pg_sql "$(cat "$top/pg1/port")" "CREATE DATABASE dblock_test OWNER dblock" >/dev/null ||
    { show_log "cannot create the test role and database" "$top/pg1/patroni.log"; return 1; }
  # The replica has them too before the cluster is called started.
  wait_until 60 has_test_db "$(cat "$top/pg2/port")" ||
    { show_log "the replica did not catch up" "$top/pg2/patroni.log"; return 1; }
  local p1 p2
  p1=$(cat "$top/pg1/port")
  p2=$(cat "$top/pg2/port")
  {
    echo "DBLOCK_TEST_CLUSTER_KIND=$mode"
    echo "DBLOCK_TEST_CLUSTER_PG_DSN=postgres://dblock:$password@127.0.0.1:$p1,127.0.0.1:$p2/dblock_test?target_session_attrs=read-write"
    for name in pg1 pg2; do
      local u=${name^^}
      echo "DBLOCK_TEST_CLUSTER_${u}_DSN=postgres://dblock:$password@127.0.0.1:$(cat "$top/$name/port")/dblock_test"
      echo "DBLOCK_TEST_CLUSTER_${u}_PORT=$(cat "$top/$name/port")"
      echo "DBLOCK_TEST_CLUSTER_${u}_REST_PORT=$(cat "$top/$name/rest_port")"
      echo "DBLOCK_TEST_CLUSTER_${u}_PROXY_PORT=$(cat "$top/$name/proxy_port")"
      echo "DBLOCK_TEST_CLUSTER_${u}_PATRONI_PID=$(cat "$top/$name/patroni.pid")"
      echo "DBLOCK_TEST_CLUSTER_${u}_PROXY_PID=$(cat "$top/$name/proxy.pid")"
      echo "DBLOCK_TEST_CLUSTER_${u}_DATA=$top/$name/data"
    done
  } >>"$top/env"
}

# postmaster NAME: the member's postmaster pid, if it runs.
postmaster() {
  local dir pid
  dir=$(cluster_dir)/$1
  [ -f "$dir/data/postmaster.pid" ] || return 1
  pid=$(head -n 1 "$dir/data/postmaster.pid")
  alive "$pid" && [[ $(tr '\0' ' ' <"/proc/$pid/cmdline") == *"$dir/data"* ]] && echo "$pid"
}

leader() {
  local dir name
  dir=$(cluster_dir)
  for name in pg1 pg2; do
    if rest_is "$(cat "$dir/$name/rest_port")" /primary; then
      echo "$name"
      return 0
    fi
  done
  say "no leader"
  return 1
}

# kill_member NAME: the member's Patroni, postmaster and every other process of its instance
# die by SIGKILL at once, as when its machine fails.
kill_member() {
  local dir pm pids
  dir=$(cluster_dir)/$1
  [ -d "$dir" ] || { say "no member $1"; return 64; }
  pm=$(postmaster "$1") || pm=
  pids="$(cat "$dir/patroni.pid") $pm"
  [ -n "$pm" ] && pids="$pids $(children "$pm" | tr '\n' ' ')"
  # shellcheck disable=SC2086
  kill -9 $pids 2>/dev/null || true
  # shellcheck disable=SC2086
  wait_until 10 all_gone $pids
}

kill_leader() {
  local name
  name=$(leader) || return 1
  kill_member "$name"
  echo "$name"
}

# wait_leader SECONDS: until a member is primary and takes a write; prints its name.
wait_leader() {
  local deadline=$((SECONDS + ${1:-60})) dir name
  dir=$(cluster_dir)
  while [ $SECONDS -lt "$deadline" ]; do
    for name in pg1 pg2; do
      if rest_is "$(cat "$dir/$name/rest_port")" /primary &&
        [ "$(pg_sql "$(cat "$dir/$name/port")" 'SELECT pg_is_in_recovery()' 2>/dev/null)" = f ]; then
        echo "$name"
        return 0
      fi
    done
    sleep 0.2
  done
  say "no leader took writes within ${1:-60} s"
  return 1
}

start_member() {
  local dir
  dir=$(cluster_dir)
  [ -d "$dir/$1" ] || { say "no member $1"; return 64; }
  if alive "$(cat "$dir/$1/patroni.pid")"; then return 0; fi
  # Orphans of a killed instance would keep its shared memory and refuse the restart.
  local p
  for p in $(ours "$dir/$1/data"); do kill -9 "$p" 2>/dev/null || true; done
  start_patroni "$dir" "$1"
  wait_until 120 rest_is "$(cat "$dir/$1/rest_port")" /health ||
    { show_log "$1 did not come back" "$dir/$1/patroni.log"; return 1; }
  # Its pid changed.
  sed -i "s/^DBLOCK_TEST_CLUSTER_${1^^}_PATRONI_PID=.*/DBLOCK_TEST_CLUSTER_${1^^}_PATRONI_PID=$(cat "$dir/$1/patroni.pid")/" "$dir/env"
}

# wait_replica SECONDS: until the replica has replayed every WAL record the leader had written.
replayed_past() { [ "$(pg_sql "$1" "SELECT pg_last_wal_replay_lsn() >= '$2'::pg_lsn")" = t ]; }
wait_replica() {
  local dir name other target
  dir=$(cluster_dir)
  name=$(leader) || return 1
  other=pg2
  [ "$name" = pg2 ] && other=pg1
  target=$(pg_sql "$(cat "$dir/$name/port")" 'SELECT pg_current_wal_lsn()') || return 1
  wait_until "${1:-30}" replayed_past "$(cat "$dir/$other/port")" "$target" ||
    { say "$other has not replayed $target within ${1:-30} s"; return 1; }
}

# replication_proxy freeze|thaw: the proxy in front of the leader stops (resumes) forwarding.
replication_proxy() {
  local dir name sig=USR1 want=frozen
  dir=$(cluster_dir)
  [ "$1" = thaw ] && { sig=USR2; want=running; }
  name=$(leader) || return 1
  kill "-$sig" "$(cat "$dir/$name/proxy.pid")"
  wait_until 10 grep -q "^$want " "$dir/$name/proxy_state" || { say "the proxy of $name is not $want"; return 1; }
  echo "$name"
}

stop_pg_member() {  # stop_pg_member DIR: Patroni stops PostgreSQL (fast) as it exits
  local dir=$1 pm=
  [ -f "$dir/patroni.pid" ] && stop_pid "$(cat "$dir/patroni.pid")" 30
  if [ -f "$dir/data/postmaster.pid" ]; then
    pm=$(head -n 1 "$dir/data/postmaster.pid")
    if alive "$pm"; then
      runuser -u postgres -- "$pg_bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 ||
        kill -9 "$pm" 2>/dev/null || true
    fi
  fi
}

# ---------------------------------------------------------------- MariaDB Galera

write_galera_config() {  # write_galera_config TOP N
  local top=$1 n=$2 dir=$1/node$2 i addrs=
  for i in 1 2 3; do addrs="$addrs${addrs:+,}127.0.0.1:$(cat "$top/node$i/gcomm_port")"; done
  cat >"$dir/my.cnf" <<CNF
[mysqld]
datadir=$dir/data
socket=$dir/mysqld.sock
pid-file=$dir/mysqld.pid
log-error=$dir/error.log
port=$(cat "$dir/port")
bind-address=127.0.0.1
skip-name-resolve
innodb_buffer_pool_size=64M
max_connections=300
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
wsrep_on=ON
wsrep_provider=$galera_lib
wsrep_cluster_name=dblock-${top##*.}
wsrep_cluster_address=gcomm://$addrs
wsrep_node_name=node$n
wsrep_node_address=127.0.0.1:$(cat "$dir/gcomm_port")
wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:$(cat "$dir/gcomm_port");ist.recv_addr=127.0.0.1:$(cat "$dir/ist_port");gcache.size=64M;evs.suspect_timeout=PT3S;evs.inactive_timeout=PT6S;evs.install_timeout=PT6S"
wsrep_sst_method=rsync
wsrep_sst_receive_address=127.0.0.1:$(cat "$dir/sst_port")
CNF
}

galera_ping() { mariadb-admin --socket="$1/mysqld.sock" -uroot ping >/dev/null 2>&1; }
galera_status() {  # galera_status DIR VARIABLE
  mariadb --socket="$1/mysqld.sock" -uroot -N -B -e "SHOW GLOBAL STATUS LIKE '$2'" 2>/dev/null | cut -f2
}
galera_synced() { [ "$(galera_status "$1" wsrep_local_state_comment)" = Synced ] && [ "$(galera_status "$1" wsrep_ready)" = ON ]; }

# launch_galera_node TOP N [--wsrep-new-cluster]: returns once the node is Synced.
launch_galera_node() {
  local top=$1 n=$2 dir=$1/node$2
  shift 2
  touch "$dir/error.log"
  chown mysql: "$dir/error.log"
  launch "$dir" mariadbd root mariadbd --defaults-file="$dir/my.cnf" --user=mysql "$@"
  local pid deadline=$((SECONDS + 180))
  pid=$(cat "$dir/mariadbd.pid")
  until galera_ping "$dir" && galera_synced "$dir"; do
    if ! alive "$pid" || [ $SECONDS -ge $deadline ]; then
      show_log "Galera node $n did not start" "$dir/error.log"
      return 1
    fi
    sleep 0.3
  done
}

start_galera() {  # start_galera TOP
  local top=$1 n
  for n in 1 2 3; do
    mkdir -p "$top/node$n"
    for f in port gcomm_port ist_port sst_port; do free_port >"$top/node$n/$f"; done
  done
  for n in 1 2 3; do
    write_galera_config "$top" "$n"
    chown -R mysql: "$top/node$n"
    mariadb-install-db --defaults-file="$top/node$n/my.cnf" --user=mysql --auth-root-authentication-method=socket \
      --skip-test-db >"$top/node$n/install.log" 2>&1 || { cat "$top/node$n/install.log" >&2; return 1; }
  done
  launch_galera_node "$top" 1 --wsrep-new-cluster || return 1
  mariadb --socket="$top/node1/mysqld.sock" -uroot <<SQL || { show_log "cannot create the test user" "$top/node1/error.log"; return 1; }
CREATE DATABASE dblock_test;
CREATE USER 'dblock'@'127.0.0.1' IDENTIFIED BY '$password';
GRANT ALL PRIVILEGES ON *.* TO 'dblock'@'127.0.0.1' WITH GRANT OPTION;
SQL
  launch_galera_node "$top" 2 || return 1
  launch_galera_node "$top" 3 || return 1
  {
    echo "DBLOCK_TEST_CLUSTER_KIND=galera"
    for n in 1 2 3; do
      echo "DBLOCK_TEST_CLUSTER_GALERA${n}_DSN=mysql://dblock:$password@127.0.0.1:$(cat "$top/node$n/port")/dblock_test"
      echo "DBLOCK_TEST_CLUSTER_GALERA${n}_PORT=$(cat "$top/node$n/port")"
      echo "DBLOCK_TEST_CLUSTER_GALERA${n}_PID=$(cat "$top/node$n/mariadbd.pid")"
      echo "DBLOCK_TEST_CLUSTER_GALERA${n}_DATA=$top/node$n/data"
    done
  } >>"$top/env"
}

node_dir() {
  local dir
  dir=$(cluster_dir) || return 1
  [[ $1 =~ ^[123]$ ]] && [ -d "$dir/node$1" ] || { say "no Galera node '$1' (1, 2 or 3)"; return 64; }
  echo "$dir/node$1"
}

kill_node() {
  local dir pid
  dir=$(node_dir "$1") || return
  pid=$(cat "$dir/mariadbd.pid")
  kill -9 "$pid" 2>/dev/null || true
  wait_until 10 all_gone "$pid"
}

start_node() {
  local dir top
  dir=$(node_dir "$1") || return
  top=$(dirname "$dir")
  if alive "$(cat "$dir/mariadbd.pid")" && galera_ping "$dir"; then return 0; fi
  launch_galera_node "$top" "$1" || return 1
  sed -i "s/^DBLOCK_TEST_CLUSTER_GALERA$1_PID=.*/DBLOCK_TEST_CLUSTER_GALERA$1_PID=$(cat "$dir/mariadbd.pid")/" "$top/env"
}

stop_galera_node() { [ -f "$1/mariadbd.pid" ] && stop_pid "$(cat "$1/mariadbd.pid")" 60; return 0; }

# ---------------------------------------------------------------- the whole cluster

kind() { sed -n 's/^DBLOCK_TEST_CLUSTER_KIND=//p' "$(cluster_dir)/env"; }

restart_cluster() {
  local dir n last
  dir=$(cluster_dir)
  case "$(kind)" in
    galera)
      # Nodes leave one by one; the last one to leave has every write and bootstraps the new
      # cluster (grastate.dat safe_to_bootstrap: 1).
      for n in 1 2 3; do stop_galera_node "$dir/node$n"; done
      last=3
      for n in 1 2 3; do grep -q '^safe_to_bootstrap: *1' "$dir/node$n/data/grastate.dat" 2>/dev/null && last=$n; done
      launch_galera_node "$dir" "$last" --wsrep-new-cluster || return 1
      for n in 1 2 3; do [ "$n" = "$last" ] || launch_galera_node "$dir" "$n" || return 1; done
      for n in 1 2 3; do
        sed -i "s/^DBLOCK_TEST_CLUSTER_GALERA${n}_PID=.*/DBLOCK_TEST_CLUSTER_GALERA${n}_PID=$(cat "$dir/node$n/mariadbd.pid")/" "$dir/env"
      done
      ;;
    pg-*)
      # The replica first, so the leader's last writes are the cluster's.
      local first second
      first=$(leader) || first=pg1
      second=pg2
      [ "$first" = pg2 ] && second=pg1
      stop_pg_member "$dir/$second"
      stop_pg_member "$dir/$first"
      start_member "$first" && wait_role "$first" primary 90 && start_member "$second" &&
        wait_role "$second" replica 120 || return 1
      [ "$(kind)" = pg-sync ] && { wait_role "$second" sync 60 || return 1; }
      wait_leader 30 >/dev/null
      ;;
  esac
}

stop_all() {
  [ -f "$state_file" ] || return 0
  local dir n p
  dir=$(cat "$state_file")
  if [ -d "$dir" ]; then
    for n in pg2 pg1; do [ -d "$dir/$n" ] && stop_pg_member "$dir/$n"; done
    for n in 1 2 3; do [ -d "$dir/node$n" ] && stop_galera_node "$dir/node$n"; done
    for n in pg1 pg2; do [ -f "$dir/$n/proxy.pid" ] && stop_pid "$(cat "$dir/$n/proxy.pid")" 10; done
    [ -f "$dir/etcd/etcd.pid" ] && stop_pid "$(cat "$dir/etcd/etcd.pid")" 10
    # Whatever is left of ours (a member's orphaned backends, an SST's rsync daemon).
    for p in $(ours "$dir"); do kill -9 "$p" 2>/dev/null || true; done
    wait_until 10 none_ours "$dir" || say "processes left in $dir: $(ours "$dir" | tr '\n' ' ')"
    case "$dir" in /tmp/dblock-test-cluster.*) rm -rf "$dir" ;; esac
  fi
  rm -f "$state_file"
}

usage() {
  echo "usage: $0 start [pg-async|pg-sync|galera] | stop | env | leader | kill-leader | wait-leader [SECONDS] |" \
    "kill-member NAME | start-member NAME | wait-replica [SECONDS] | freeze-replication | thaw-replication | kill-node N | start-node N | restart" >&2
  exit 64
}

verb=${1:-}
# Every verb but start acts on the cluster its state file names: none named, none acted on.
case "$verb" in
  stop | env | leader | kill-leader | wait-leader | kill-member | start-member | wait-replica | \
    freeze-replication | thaw-replication | kill-node | start-node | restart) need_state "$verb" ;;
esac
case "$verb" in
  start)
    mode=${2:-pg-async}
    case "$mode" in pg-async | pg-sync | galera) ;; *) usage ;; esac
    # A state file given that names a cluster (its temp dir still there, even with nothing left
    # running) is someone's: refused, never stopped. An empty one, or a stale one whose dir is
    # gone, is taken.
    if [ -n "$state_file" ] && named=$(cat "$state_file" 2>/dev/null) && [ -n "$named" ] && [ -d "$named" ]; then
      say "$state_file already names a cluster ($named), and start never stops a cluster it did not start:" \
        "stop that one (DBLOCK_TEST_CLUSTER_STATE=$state_file $0 stop), or start without DBLOCK_TEST_CLUSTER_STATE" \
        "(a state file of its own) or with another"
      exit 1
    fi
    [ "$(id -u)" -eq 0 ] || { say "run as root"; exit 1; }
    dir=$(mktemp -d /tmp/dblock-test-cluster.XXXXXX)
    chmod 755 "$dir"
    [ -n "$state_file" ] || state_file=$dir.state
    echo "$dir" >"$state_file"
    echo "DBLOCK_TEST_CLUSTER_STATE=$state_file" >"$dir/env"
    if [ "$mode" = galera ]; then
      start_galera "$dir" || { stop_all; exit 1; }
    else
      start_pg_cluster "$dir" "$mode" || { stop_all; exit 1; }
    fi
    sed 's/^/export /' "$dir/env"
    ;;
  stop) stop_all ;;
  env) sed 's/^/export /' "$(cluster_dir)/env" ;;
  leader) leader ;;
  kill-leader) kill_leader ;;
  wait-leader) wait_leader "${2:-60}" ;;
  kill-member) [ $# -eq 2 ] || usage; kill_member "$2" ;;
  start-member) [ $# -eq 2 ] || usage; start_member "$2" ;;
  wait-replica) wait_replica "${2:-30}" ;;
  freeze-replication) replication_proxy freeze ;;
  thaw-replication) replication_proxy thaw ;;
  kill-node) [ $# -eq 2 ] || usage; kill_node "$2" ;;
  start-node) [ $# -eq 2 ] || usage; start_node "$2" ;;
  restart) restart_cluster ;;
  *) usage ;;
esac

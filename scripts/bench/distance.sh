# shellcheck shell=bash
# Section "distance": the servers as a farm's hosts see them, some milliseconds away. Every
# connection goes through scripts/bench/delay_proxy.py on 127.0.0.1, which holds each byte half
# the round trip in each direction (and the TCP handshake a round trip), at each round trip of
# $DBLOCK_BENCH_RTTS (ms; default "0 2 10": 0 is the proxy alone). Per server (MariaDB,
# PostgreSQL) and round trip, interleaved (A B C A B C ...):
#   - `dblock -s STRATEGY run KEY -- true` for every strategy;
#   - the floors (pg_floor.c, mysql_floor.c): connect, one durable take that numbers the token,
#     the command; and with -r, the same plus an awaited release (what a lock must do at least);
#   - `etcdctl lock KEY true` against the bench's etcd through a proxy of the same distance;
#   - on PostgreSQL, a lease run over TLS (every other connection is plaintext: plaintext_pg);
# then each strategy's ratio to the floor with a release (goal <= 1.25x at 10 ms), to the floor
# without, and to etcdctl lock (goal <= 1.0x at 10 ms).
# And the handoff at $DBLOCK_BENCH_DISTANCE_HANDOFF_RTT ms (default 10): the holder's command
# ends -> the waiter's command starts, every server x strategy and etcdctl lock, both ends
# through the proxy (goal <= one round trip + 5 ms), after the round trip the proxy really gives
# there (proxy_rtt.py: an echo through it). Each row's note gives the load average when its group
# started. Sourced; needs servers.sh (pg_floor) and handoff.sh (one_handoff).

# distance_proxy VAR TARGET_PORT RTT_MS: starts a delay proxy in front of 127.0.0.1:TARGET_PORT
# and sets VAR to its port; the proxy is stopped at the section's end (and by stop_bg at exit).
# Called in this shell, never in $(...): the proxy's pid must reach distance_pids.
distance_pids=()
distance_proxies=0
distance_proxy() {
  local f pid
  distance_proxies=$((distance_proxies + 1))
  f="$tmp/proxy.$distance_proxies"
  rm -f "$f"
  python3 "$here/bench/delay_proxy.py" --target-port "$2" \
    --delay-ms "$(awk -v r="$3" 'BEGIN { print r / 2 }')" --port-file "$f" --lifetime 1800 >/dev/null 2>>"$tmp/proxy.log" &
  pid=$!
  bg_pids+=("$pid")
  distance_pids+=("$pid")
  wait_for 10 test -s "$f" || return 1
  printf -v "$1" '%s' "$(cat "$f")"
}
distance_stop() {
  local p keep=() d
  for p in "${distance_pids[@]}"; do kill_tree "$p"; wait "$p" 2>/dev/null || true; done
  for p in "${bg_pids[@]}"; do
    for d in "${distance_pids[@]}"; do [ "$p" != "$d" ] || continue 2; done
    keep+=("$p")
  done
  bg_pids=("${keep[@]}")
  distance_pids=()
}

# port_of URL: the port of a mysql://, postgres:// or http:// URL (the scheme's default if none);
# fails unless its host is this machine's loopback (the proxy reaches nothing else).
port_of() {
  URL=$1 python3 -c '
import os, sys
from urllib.parse import urlsplit
u = urlsplit(os.environ["URL"])
if u.hostname not in ("127.0.0.1", "localhost"):
    sys.exit("the server is not on 127.0.0.1: the delay proxy is loopback only")
print(u.port or {"mysql": 3306, "postgres": 5432, "postgresql": 5432}.get(u.scheme, 80))'
}
# via_port URL PORT: URL with its host and port replaced by 127.0.0.1:PORT (credentials kept).
via_port() {
  URL=$1 python3 -c '
import os, sys
from urllib.parse import urlsplit, urlunsplit
u = urlsplit(os.environ["URL"])
auth = u.netloc.rsplit("@", 1)[0] + "@" if "@" in u.netloc else ""
print(urlunsplit((u.scheme, auth + "127.0.0.1:" + sys.argv[1], u.path, u.query, u.fragment)))' "$2"
}

# my_floor: builds $tmp/mysql_floor from scripts/bench/mysql_floor.c once per bench run; on
# failure the compiler's first line is in $tmp/err.
my_floor() {
  # shellcheck disable=SC2046  # the flags are words
  [ -x "$tmp/mysql_floor" ] ||
    cc -O2 $(mariadb_config --cflags 2>/dev/null || echo -I/usr/include/mariadb) -o "$tmp/mysql_floor" \
      "$here/bench/mysql_floor.c" $(mariadb_config --libs 2>/dev/null || echo -lmariadb) 2>"$tmp/err"
}

# floor_cmd BACKEND PROXY_PORT DSN [-r]: the floor's command string through the proxy.
floor_cmd() {
  case $1 in
    mysql) printf 'MYSQL_FLOOR_CNF=%q MYSQL_FLOOR_PORT=%q %q %s true' "$tmp/my.cnf" "$2" "$tmp/mysql_floor" "${4:-}" ;;
    postgres) printf 'PG_FLOOR_DSN=%q %q %s true' "$3" "$tmp/pg_floor" "${4:-}" ;;
  esac
}
floor_name() { case $1 in mysql) echo mysql_floor ;; postgres) echo pg_floor ;; esac; }

distance_load() { cut -d' ' -f1 /proc/loadavg; }

section_distance() {
  local rtts=${DBLOCK_BENCH_RTTS:-0 2 10} hrtt=${DBLOCK_BENCH_DISTANCE_HANDOFF_RTT:-10}
  local druns=${DBLOCK_BENCH_DISTANCE_RUNS:-$runs} b s rtt port pport dsn floor load etcd_port="" have_floor
  local -A target=()
  if ! command -v python3 >/dev/null; then
    fail_row distance all "no python3 for the delay proxy"
    return 0
  fi
  for b in mysql postgres; do
    [ -n "$(dsn_of "$b")" ] || continue
    if ! target[$b]=$(port_of "$(dsn_of "$b")" 2>"$tmp/err"); then
      fail_row distance "$b" "$(tail -n 1 "$tmp/err")"
      unset "target[$b]"
      continue
    fi
    eval "$(dbl "$b" init)" >/dev/null 2>"$tmp/err" || { fail_row distance "$b: dblock init" "$(head -n 1 "$tmp/err")"; unset "target[$b]"; }
  done
  [ -z "${etcd_endpoint:-}" ] || etcd_port=$(port_of "$etcd_endpoint")
  for rtt in $rtts; do
    for b in mysql postgres; do
      [ -n "${target[$b]:-}" ] || continue
      say "distance: $b at $rtt ms round trip"
      load=$(distance_load)
      if ! distance_proxy port "${target[$b]}" "$rtt"; then
        fail_row distance "$b $rtt ms" "the delay proxy did not start: $(tail -n 1 "$tmp/proxy.log")"
        continue
      fi
      dsn=$(via_port "$(dsn_of "$b")" "$port")
      floor=$(floor_name "$b")
      for s in $(strategies_of "$b"); do
        cell "$b $rtt ms: dblock -s $s run k -- true" \
          "$(printf 'DBLOCK_DSN=%q %q -s %q run %q -- true' "$dsn" "$bin" "$s" "dist-$s")"
      done
      # What TLS adds to a run (the bench's own connections are plaintext: plaintext_pg): the
      # test server offers it, and libpq's default would take it.
      [ "$b" != postgres ] || case $dsn in *sslmode=disable*)
        cell "$b $rtt ms: dblock -s lease run k -- true over TLS (sslmode=require)" \
          "$(printf 'DBLOCK_DSN=%q %q -s lease run %q -- true' "${dsn/sslmode=disable/sslmode=require}" "$bin" "dist-lease")" ;;
      esac
      have_floor=1
      if { [ "$b" = mysql ] && my_floor; } || { [ "$b" = postgres ] && pg_floor; }; then
        cell "$b $rtt ms: $floor -r k -- true (take, release)" "$(floor_cmd "$b" "$port" "$dsn" -r)"
        cell "$b $rtt ms: $floor k -- true (take, no release)" "$(floor_cmd "$b" "$port" "$dsn")"
      else
        fail_row distance "$b $rtt ms: $floor" "cc: $(head -n 1 "$tmp/err")"
        have_floor=""
      fi
      if [ -n "$etcd_port" ] && distance_proxy pport "$etcd_port" "$rtt"; then
        cell "$b $rtt ms: etcdctl lock k true" "etcdctl --endpoints=http://127.0.0.1:$pport lock dist-etcd true"
      elif [ -n "$etcd_port" ]; then
        fail_row distance "$b $rtt ms: etcdctl lock" "the delay proxy did not start"
      fi
      interleave distance "$druns" "$(nproc) cores, load $load at the group's start"
      [ -z "$(median_of distance "$b $rtt ms: dblock -s lease run k -- true over TLS (sslmode=require)")" ] ||
        ratio_row distance "$b $rtt ms: lease over TLS / lease" "$b $rtt ms: dblock -s lease run k -- true over TLS (sslmode=require)" \
          "$b $rtt ms: dblock -s lease run k -- true"
      for s in $(strategies_of "$b"); do
        local run="$b $rtt ms: dblock -s $s run k -- true" goal="" egoal=""
        [ "$rtt" != 10 ] || goal=1.25 egoal=1.0
        if [ -n "$have_floor" ]; then
          ratio_row distance "$b $rtt ms: $s / $floor -r" "$run" "$b $rtt ms: $floor -r k -- true (take, release)" $goal
          ratio_row distance "$b $rtt ms: $s / $floor" "$run" "$b $rtt ms: $floor k -- true (take, no release)"
        fi
        [ -z "$etcd_port" ] || ratio_row distance "$b $rtt ms: $s / etcdctl lock" "$run" "$b $rtt ms: etcdctl lock k true" $egoal
      done
      # The floor's own ratio to etcdctl: where the floor with a release is over 1.0x (its
      # server's handshake: PostgreSQL's SCRAM is two round trips more than MariaDB's), no run
      # that also releases can meet the etcdctl goal there.
      [ -z "$have_floor" ] || [ -z "$etcd_port" ] ||
        ratio_row distance "$b $rtt ms: $floor -r / etcdctl lock" "$b $rtt ms: $floor -r k -- true (take, release)" \
          "$b $rtt ms: etcdctl lock k true"
      distance_stop
    done
  done
  distance_handoff "$hrtt"
}

# distance_handoff RTT: one_handoff (handoff.sh) of every server cell and etcd with both ends
# through delay proxies; the bench's DSNs and etcd endpoint point at the proxies meanwhile (its
# `waiting` probes keep the direct connections of `my` and `pg`).
distance_handoff() {
  local rtt=$1 b c i port load
  local saved_mysql=$mysql_dsn saved_postgres=$postgres_dsn saved_etcd=${etcd_endpoint:-}
  local -a cells=() dead=()
  say "distance: handoff at $rtt ms round trip"
  load=$(distance_load)
  for b in mysql postgres; do
    [ -n "${target[$b]:-}" ] || continue
    if ! distance_proxy port "${target[$b]}" "$rtt"; then
      fail_row distance "handoff at $rtt ms, $b" "the delay proxy did not start"
      continue
    fi
    printf -v "${b}_dsn" '%s' "$(via_port "$(dsn_of "$b")" "$port")"
    for s in $(strategies_of "$b"); do cells+=("$b:$s"); done
  done
  if [ -n "$etcd_port" ] && distance_proxy port "$etcd_port" "$rtt"; then
    etcd_endpoint="http://127.0.0.1:$port"
    cells+=(etcd)
  fi
  make_holder_script
  for c in "${!cells[@]}"; do : >"$tmp/dhandoff.$c"; done
  for ((i = 0; i < handoff_runs; i++)); do
    for c in "${!cells[@]}"; do
      [ -z "${dead[c]:-}" ] || continue
      one_handoff "${cells[$c]}" >>"$tmp/dhandoff.$c" 2>"$tmp/err.handoff" ||
        dead[c]="round $((i + 1)): $(tail -n 1 "$tmp/err.handoff")"
      job_pids=()
    done
  done
  mysql_dsn=$saved_mysql postgres_dsn=$saved_postgres etcd_endpoint=$saved_etcd
  distance_stop
  # The instrument itself: the round trip the proxy really gives at this distance (an echo
  # through it, 200 times), so a handoff's milliseconds past the goal can be told from the
  # proxy's own (its wake-ups and loop, about 0.1 ms each way).
  if python3 "$here/bench/proxy_rtt.py" --rtt-ms "$rtt" --count 200 >"$tmp/proxy_rtt" 2>"$tmp/err"; then
    stat_row distance "round trip through the delay proxy at $rtt ms (TCP echo)" ms "$tmp/proxy_rtt" \
      "$(nproc) cores, load $(distance_load); the echo's own time included"
  else
    fail_row distance "round trip through the delay proxy at $rtt ms" "$(tail -n 1 "$tmp/err")"
  fi
  local goal
  goal=$(awk -v r="$rtt" 'BEGIN { print r + 5 }')
  for c in "${!cells[@]}"; do
    local label="handoff at $rtt ms, $(cell_label "${cells[$c]}")"
    if [ -n "${dead[c]:-}" ]; then
      fail_row distance "$label" "${dead[c]}"
    elif [ "${cells[$c]}" = etcd ]; then
      stat_row distance "$label" ms "$tmp/dhandoff.$c" "$(nproc) cores, load $load at the start"
    else
      stat_row distance "$label" ms "$tmp/dhandoff.$c" "$(nproc) cores, load $load at the start" "<=" "$goal"
    fi
  done
}

# shellcheck shell=bash
# Section "storm": the 02:00 start storm (issue 30). $storm_contenders `dblock run` on one key,
# released at the same instant (scripts/bench/storm.py), without -w, per server and strategy
# (lease, advisory); the winner's command lasts $storm_job_s s, longer than the storm. Rows: the
# contenders, the server's max_connections, each exit status's count, the time from the start
# to the last exit of a contender that did not run; storm.dat (exits over time) for the chart.
# Goal: 1 run, the rest exit 75, nothing else, all of them out within 10 s, against servers with
# max_connections=40. The section starts its own pair (scripts/test-servers.sh, max_connections
# $storm_max_connections: DBLOCK_BENCH_STORM_MAX_CONNECTIONS) when the bench measures servers, so
# the other sections' servers can keep room for their 100 waiters.
# The model is a farm: every host has its own CPU and the server its own machine. On one
# machine the contenders run at niceness $storm_nice (DBLOCK_BENCH_STORM_NICE; 0: no such model)
# in a scheduling group of their own (storm.py --nice), so their start-up (exec, the module's
# dlopen, the connection and its authentication: ~14 ms of CPU each) takes only what the
# server leaves. Without it, PostgreSQL's postmaster, one process that accepts and forks for
# every connection, gets a sibling group's share of the cores; it falls behind, its listen
# queue overflows and the kernel drops SYNs (each cell's "listen drops", from
# /proc/net/netstat), and a contender whose every SYN was dropped until its connect timeout
# cannot tell that from a server that is down: exit 69.
# Sourced.

# listen_drops: the kernel's count of connections dropped at a full listen queue (TcpExt
# ListenDrops, every socket of this network namespace).
listen_drops() {
  awk '/^TcpExt:/ { if (!h) { for (i = 1; i <= NF; i++) c[$i] = i; h = 1 } else print $c["ListenDrops"] }' /proc/net/netstat
}

storm_max_connections() {
  if [ "$1" = mysql ]; then my "SELECT @@max_connections"; else pg "SHOW max_connections"; fi
}

# storm_cell BACKEND STRATEGY: one storm; its rows, and its block of storm.dat.
storm_cell() {
  local b=$1 s=$2 label="$1 $2" maxconn summary code n last others drops load model
  maxconn=$(storm_max_connections "$b" 2>/dev/null || echo "?")
  say "storm: $label, $storm_contenders contenders at nice $storm_nice, max_connections $maxconn"
  : >"$tmp/storm.err"
  drops=$(listen_drops)
  load=$(cut -d' ' -f1 /proc/loadavg)
  if ! summary=$(DBLOCK_DSN=$(dsn_of "$b") python3 "$here/bench/storm.py" --nice "$storm_nice" "$storm_contenders" "$tmp/storm.exits" \
    "$tmp/storm.err" -- "$bin" -s "$s" run "storm-$s" -- sleep "$storm_job_s" 2>"$tmp/err"); then
    fail_row storm "$label" "$(head -n 1 "$tmp/err")"
    return 0
  fi
  drops=$(($(listen_drops) - drops))
  model="contenders at nice $storm_nice in a group of their own (a farm: the server's CPU is its own)"
  [ "$storm_nice" != 0 ] || model="contenders at the server's priority (one machine: the server shares its CPU)"
  load="$load at start, $(cut -d' ' -f1 /proc/loadavg) at end"
  say "storm: $label: $summary; listen drops $drops; load $load"
  result storm "$label: contenders" count "$storm_contenders" "" "" 1 \
    "max_connections $maxconn; $model, their CPU ${summary##*cpu } s on $(nproc) cores; listen drops $drops; load $load"
  for code in $(cut -d' ' -f1 "$tmp/storm.exits" | sort -n | uniq); do
    n=$(awk -v c="$code" '$1 == c { n++ } END { print n }' "$tmp/storm.exits")
    result storm "$label: exit $code" count "$n" "" "" 1 \
      "$(grep -v '^$' "$tmp/storm.err" | sed 's/^dblock: //' | sort | uniq -c | sort -rn | head -n 1 | cut -c1-160 |
        awk -v c="$code" 'c != 0 && c != 75 { sub(/^ +/, ""); print "most common: " $0 }')"
  done
  last=$(awk '$1 != 0 && $2 > m { m = $2 } END { printf "%.0f", m + 0 }' "$tmp/storm.exits")
  others=$(awk '$1 != 0 && $1 != 75 { n++ } END { print n + 0 }' "$tmp/storm.exits")
  local runs met=met
  runs=$(awk '$1 == 0 { n++ } END { print n + 0 }' "$tmp/storm.exits")
  [ "$runs" = 1 ] && [ "$others" = 0 ] && [ "$last" -le 10000 ] || met="NOT met"
  result storm "$label: last exit of the others" ms "$last" "" "" 1 \
    "goal 1 run, $((storm_contenders - 1)) exit 75, 0 other, <= 10 s: $met ($runs run, $others other)"
  # Exits over time: the count of contenders gone by each exit, one block per cell.
  {
    printf '"%s" ""\n' "$label"
    sort -k2,2n "$tmp/storm.exits" | awk '{ printf "%.3f %d\n", $2 / 1000, NR }'
    printf '\n\n'
  } >>"$out/storm.dat"
}

section_storm() {
  : >"$out/storm.dat"
  if [ -n "$mysql_dsn$postgres_dsn" ]; then
    # A subshell: the servers' DSNs and client files are the storm's own until it ends.
    local state=$tmp/storm-servers.state env rc=0
    # Without the measured servers' PG* settings, which would point its own psql elsewhere.
    if ! env=$(env -u PGHOST -u PGPORT -u PGUSER -u PGPASSWORD -u PGDATABASE DBLOCK_TEST_SERVERS_STATE="$state" \
      DBLOCK_TEST_MAX_CONNECTIONS="$storm_max_connections" "$here/test-servers.sh" start 2>"$tmp/err"); then
      fail_row storm "servers with max_connections $storm_max_connections" "$(tail -n 1 "$tmp/err")"
    else
      (
        eval "$env"
        mysql_dsn=${mysql_dsn:+$DBLOCK_TEST_MYSQL_DSN} postgres_dsn=${postgres_dsn:+$DBLOCK_TEST_POSTGRES_DSN}
        unset DBLOCK_TEST_MYSQL_DSN DBLOCK_TEST_POSTGRES_DSN DBLOCK_TEST_PGBOUNCER_DSN DBLOCK_TEST_PGBOUNCER_SESSION_DSN
        tmp=$tmp/storm failures=0
        mkdir -p "$tmp"
        [ -z "$mysql_dsn" ] || split_dsn mysql "$mysql_dsn" "$tmp/my.cnf"
        # shellcheck disable=SC1091
        [ -z "$postgres_dsn" ] || { split_dsn postgres "$postgres_dsn" "$tmp/pg.env" && . "$tmp/pg.env"; }
        storm_cells
        exit "$failures"
      ) || rc=$?
      failures=$((failures + rc))
      DBLOCK_TEST_SERVERS_STATE=$state "$here/test-servers.sh" stop >/dev/null 2>&1 || true
    fi
  else
    storm_cells
  fi
  [ -s "$out/storm.dat" ] || rm -f "$out/storm.dat"
}

storm_cells() {
  local b s
  for b in $(backends_on); do
    [ "$b" != sqlite ] || continue
    eval "$(dbl "$b" init)" >/dev/null 2>"$tmp/err" || { fail_row storm "$b: dblock init" "$(head -n 1 "$tmp/err")"; continue; }
    for s in lease advisory; do
      storm_cell "$b" "$s"
      sleep 2  # the server's sessions of this storm are gone before the next
    done
  done
}

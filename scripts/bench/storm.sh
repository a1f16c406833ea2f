# shellcheck shell=bash
# Section "storm": the 02:00 start storm (issue 30). $storm_contenders `dblock run` on one key,
# released at the same instant (scripts/bench/storm.py), without -w, per server and strategy
# (lease, advisory), and the same storm of the floor (pg_floor.c / mysql_floor.c -r: connect, one
# durable take, the command, a release), in $storm_rounds interleaved rounds; the winner's command
# lasts $storm_job_s s, longer than the storm. Rows: the time from the start to the last exit of
# a contender that did not run (median, min-max), how many rounds met the counts, the ratio to
# the floor's storm; storm.dat (exits over time) for the chart. Goals: 1 run, the rest exit 75,
# nothing else, against servers with max_connections=40, and the duration <= 1.2x the floor's
# storm on the same server and machine (in place of a fixed 10 s: on two cores that also run
# the server, the floor's own PostgreSQL storm takes longer). The section starts its own pair
# (scripts/test-servers.sh, max_connections
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

# storm_once LABEL COMMAND...: one storm of COMMAND; sets storm_last (ms from the start to the last
# exit of a contender that did not run), storm_runs (exit 0), storm_others (neither 0 nor 75),
# storm_note (the counts, the contenders' CPU, listen drops, load) and, when storm_chart is 1,
# adds its block to storm.dat (the chart shows the first round of each cell). Returns 1, after a FAILED row, when the storm itself failed.
storm_once() {
  local label=$1 summary drops load model
  shift
  : >"$tmp/storm.err"
  drops=$(listen_drops)
  load=$(cut -d' ' -f1 /proc/loadavg)
  if ! summary=$(python3 "$here/bench/storm.py" --nice "$storm_nice" "$storm_contenders" "$tmp/storm.exits" \
    "$tmp/storm.err" -- "$@" 2>"$tmp/err"); then
    fail_row storm "$label" "$(head -n 1 "$tmp/err")"
    return 1
  fi
  drops=$(($(listen_drops) - drops))
  model="nice $storm_nice in a group of their own (a farm: the server's CPU is its own)"
  [ "$storm_nice" != 0 ] || model="the server's priority (one machine: the server shares its CPU)"
  storm_last=$(awk '$1 != 0 && $2 > m { m = $2 } END { printf "%.0f", m + 0 }' "$tmp/storm.exits")
  storm_runs=$(awk '$1 == 0 { n++ } END { print n + 0 }' "$tmp/storm.exits")
  storm_others=$(awk '$1 != 0 && $1 != 75 { n++ } END { print n + 0 }' "$tmp/storm.exits")
  storm_note="$summary; contenders at $model on $(nproc) cores; listen drops $drops; load $load at start, $(cut -d' ' -f1 /proc/loadavg) at end"
  say "storm: $label: $storm_note"
  local code n
  for code in $(cut -d' ' -f1 "$tmp/storm.exits" | sort -n | uniq); do
    [ "$code" = 0 ] || [ "$code" = 75 ] || {
      n=$(awk -v c="$code" '$1 == c { n++ } END { print n }' "$tmp/storm.exits")
      say "storm: $label: $n exit $code, most common: $(grep -v '^$' "$tmp/storm.err" | sed 's/^dblock: //' | sort | uniq -c | sort -rn | head -n 1 | cut -c1-160)"
    }
  done
  # Exits over time: the count of contenders gone by each exit, one block per storm.
  [ "${storm_chart:-1}" = 1 ] || return 0
  {
    printf '"%s" ""\n' "$label"
    sort -k2,2n "$tmp/storm.exits" | awk '{ printf "%.3f %d\n", $2 / 1000, NR }'
    printf '\n\n'
  } >>"$out/storm.dat"
}

# storm_floor_cmd BACKEND: the floor's storm command (pg_floor.c / mysql_floor.c with -r: connect,
# one durable take that numbers the token, the winner's command, a release), printed one word a
# line; fails when the floor cannot be built. The floor's own first run makes its table, so the
# storm does not race to create it.
storm_floor_cmd() {
  case $1 in
    postgres) pg_floor || return 1
      PG_FLOOR_DSN=$postgres_dsn "$tmp/pg_floor" -r true || return 1
      printf '%s\n' env "PG_FLOOR_DSN=$postgres_dsn" "$tmp/pg_floor" -r ;;
    mysql) my_floor || return 1
      MYSQL_FLOOR_CNF=$tmp/my.cnf "$tmp/mysql_floor" -r true || return 1
      printf '%s\n' env "MYSQL_FLOOR_CNF=$tmp/my.cnf" "$tmp/mysql_floor" -r ;;
  esac
}

# storm_backend BACKEND: $storm_rounds rounds of one storm per strategy (lease, advisory) and one of
# the floor, in turn (A B F A B F ...), so a change in the machine's load hits each alike. Rows
# per strategy: the last exit of the others (median, min-max, rounds), whether every round met
# the counts (1 run, the rest 75, nothing else), and the ratio to the floor's storm
# (goal <= 1.2x).
storm_backend() {
  local b=$1 s round maxconn floor=() label counts med min max n
  maxconn=$(storm_max_connections "$b" 2>/dev/null || echo "?")
  if ! mapfile -t floor < <(storm_floor_cmd "$b" 2>"$tmp/err") || [ ${#floor[@]} = 0 ]; then
    fail_row storm "$b: $(floor_name "$b") storm" "the floor could not be built or run: $(head -n 1 "$tmp/err")"
    floor=()
  fi
  for s in lease advisory floor; do : >"$tmp/storm-$s.ms"; : >"$tmp/storm-$s.counts"; done
  for ((round = 1; round <= storm_rounds; round++)); do
    storm_chart=$((round == 1))
    for s in lease advisory floor; do
      if [ "$s" = floor ]; then
        [ ${#floor[@]} -gt 0 ] || continue
        storm_once "$b $(floor_name "$b") (round $round)" "${floor[@]}" sleep "$storm_job_s" || continue
      else
        DBLOCK_DSN=$(dsn_of "$b") storm_once "$b $s (round $round)" "$bin" -s "$s" run "storm-$s" -- sleep "$storm_job_s" || continue
      fi
      echo "$storm_last" >>"$tmp/storm-$s.ms"
      echo "$storm_runs $storm_others $storm_last" >>"$tmp/storm-$s.counts"
      echo "$storm_note" >"$tmp/storm-$s.note"
      sleep 2  # this storm's server sessions are gone before the next
    done
  done
  for s in lease advisory floor; do
    label="$b $s"
    [ "$s" != floor ] || label="$b $(floor_name "$b") -r"
    [ -s "$tmp/storm-$s.ms" ] || continue
    counts=$(awk -v n="$storm_contenders" '{ r++; if ($1 == 1 && $2 == 0) m++ }
      END { printf "%d of %d rounds met 1 run, %d exit 75, 0 other", m, r, n - 1 }' "$tmp/storm-$s.counts")
    read -r med min max n < <(stats "$tmp/storm-$s.ms")
    result storm "$label: last exit of the others" ms "$med" "$min" "$max" "$n" \
      "$counts; max_connections $maxconn; last round: $(cat "$tmp/storm-$s.note")"
  done
  for s in lease advisory; do
    ratio_row storm "$b $s storm / $(floor_name "$b") storm" "$b $s: last exit of the others" \
      "$b $(floor_name "$b") -r: last exit of the others" 1.2
  done
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
        mysql_dsn=${mysql_dsn:+$DBLOCK_TEST_MYSQL_DSN} postgres_dsn=${postgres_dsn:+$(plaintext_pg "$DBLOCK_TEST_POSTGRES_DSN")}
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
    storm_backend "$b"
  done
}

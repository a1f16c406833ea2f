# shellcheck shell=bash
# Section "servers": per strategy on MariaDB and PostgreSQL, statements, connections,
# transactions and client sends (~round trips) per `dblock run k -- true`, and its wall time,
# next to the hand-written lease scripts (scripts/bench/mysql_lease.sh, psql_lease.sh); on
# PostgreSQL also a lease run against pg_floor.c and `etcdctl lock`; a lease run's RssAnon at
# the command's start. Sourced.
#
# Counting: the server's cumulative counters are read before and after $count_runs runs; the
# probe's own share is measured by two probes with nothing in between and subtracted. This
# assumes an otherwise idle server (the counters are server- or database-wide): use a private one.

# Snapshots print "metric value" lines: stmts, conns, [xacts,] then a breakdown "by:KIND n".
my_snapshot() {
  my "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Connections')
      OR (Variable_name LIKE 'Com\_%' AND Variable_name <> 'Com_show_status')" |
    awk '$1 == "Questions" { print "stmts", $2; next } $1 == "Connections" { print "conns", $2; next }
         { sub(/^Com_/, "by:", $1); print }'
}
pg_snapshot() {
  # pg_stat_database is written by each backend when it ends, shortly after its client has gone.
  sleep 0.3
  pg "WITH s AS (SELECT lower(substring(ltrim(query) FROM '^[A-Za-z]+')) AS kind, calls FROM pg_stat_statements
                WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()))
      SELECT 'stmts', coalesce(sum(calls), 0) FROM s
      UNION ALL SELECT 'conns', sessions FROM pg_stat_database WHERE datname = current_database()
      UNION ALL SELECT 'xacts', xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()
      UNION ALL (SELECT 'by:' || coalesce(kind, '?'), sum(calls) FROM s GROUP BY kind ORDER BY kind)"
}

# counted BACKEND LABEL COMMAND-STRING: per-run statements, connections, transactions.
counted() {
  local backend=$1 label=$2 cmd=$3 snap=pg_snapshot i
  [ "$backend" != mysql ] || snap=my_snapshot
  if ! eval "$cmd" >/dev/null 2>"$tmp/err"; then  # warm-up: the key's row exists from here on
    fail_row "$backend" "statements/run, $label" "$(head -n 1 "$tmp/err")"
    return 0
  fi
  if ! { "$snap" >"$tmp/p0" && "$snap" >"$tmp/p1" && "$snap" >"$tmp/c0"; } 2>"$tmp/err"; then
    fail_row "$backend" "statements/run, $label" "probe failed: $(head -n 1 "$tmp/err")"
    return 0
  fi
  for ((i = 0; i < count_runs; i++)); do
    eval "$cmd" >/dev/null 2>"$tmp/err" ||
      { fail_row "$backend" "statements/run, $label" "run failed: $(head -n 1 "$tmp/err")"; return 0; }
  done
  "$snap" >"$tmp/c1" 2>"$tmp/err" || { fail_row "$backend" "statements/run, $label" "probe failed"; return 0; }
  # per run = ((c1 - c0) - (p1 - p0)) / runs; the statements row's note lists the breakdown.
  awk -v n="$count_runs" -v backend="$backend" -v label="$label" '
    FILENAME == ARGV[1] { p0[$1] = $2; next }
    FILENAME == ARGV[2] { p1[$1] = $2; next }
    FILENAME == ARGV[3] { c0[$1] = $2; next }
    { d[$1] = (($2 - c0[$1]) - (p1[$1] - p0[$1])) / n; order[FNR] = $1; count = FNR }
    END {
      note = ""
      for (i = 1; i <= count; i++) {
        k = order[i]
        if (k ~ /^by:/ && (d[k] > 0.005 || d[k] < -0.005)) note = note sprintf(" %s=%g", substr(k, 4), d[k])
      }
      out("statements/run, " label, "stmts", "stmts", "per run:" note)
      out("connections/run, " label, "conns", "conns", "")
      if ("xacts" in d) out("transactions/run, " label, "xacts", "xacts", "")
    }
    function out(m, k, unit, note) { printf "%s\t%s\t%s\t%.2f\t\t\t%d\t%s\n", backend, m, unit, d[k], n, note }
  ' "$tmp/p0" "$tmp/p1" "$tmp/c0" "$tmp/c1" >>"$results"
}

# client_sends BACKEND LABEL COMMAND-STRING: the messages the client side sends per run
# (send(2) and sendmsg(2) calls, connection set-up and authentication included): each is about
# one round trip, since the clients wait for every reply.
client_sends() {
  if command -v strace >/dev/null; then
    syscalls_per_run "$1" sendto,sendmsg "client sends (~round trips)/run, $2" "$3"
  else
    fail_row "$1" "client sends (~round trips)/run, $2" "no strace (apt-get install strace)"
  fi
}

# peer_script BACKEND: the hand-written lease script's command string for KEY (arguments appended).
peer_script() {
  case $1 in
    mysql) printf 'MYSQL_LEASE_CNF=%q LEASE_TABLE=%q %q' "$tmp/my.cnf" "${DBLOCK_TABLE_PREFIX}locks" "$here/bench/mysql_lease.sh" ;;
    postgres) printf 'LEASE_TABLE=%q %q' "${DBLOCK_TABLE_PREFIX}locks" "$here/bench/psql_lease.sh" ;;
  esac
}
peer_name() { case $1 in mysql) echo mysql_lease.sh ;; postgres) echo psql_lease.sh ;; esac; }

section_servers() {
  local b s
  for b in $(backends_on); do
    [ "$b" != sqlite ] || continue
    say "servers: $b"
    eval "$(dbl "$b" init)" >/dev/null 2>"$tmp/err" || { fail_row "$b" "dblock init" "$(head -n 1 "$tmp/err")"; continue; }
    for s in $(strategies_of "$b"); do
      counted "$b" "$s" "$(dbl "$b" -s "$s" run "count-$s" -- true)"
      client_sends "$b" "$s" "$(dbl "$b" -s "$s" run "count-$s" -- true)"
    done
    counted "$b" "$(peer_name "$b")" "$(peer_script "$b") count-sh 60 -- true"
    client_sends "$b" "$(peer_name "$b")" "$(peer_script "$b") count-sh 60 -- true"
    for s in $(strategies_of "$b"); do
      cell "dblock -s $s run k -- true" "$(dbl "$b" -s "$s" run "wall-$s" -- true)"
    done
    cell "$(peer_name "$b") k 60 -- true" "$(peer_script "$b") wall-sh 60 -- true"
    interleave "$b" "$runs"
    ratio_row "$b" "$(peer_name "$b") / dblock lease" "$(peer_name "$b") k 60 -- true" "dblock -s lease run k -- true"
    rss_anon "$b" "RssAnon, dblock -s lease run k" "$rss_runs" "$(dbl "$b" -s lease run rss-lease)"
    [ "$b" != postgres ] || postgres_floor
  done
}

# pg_floor: builds $tmp/pg_floor from scripts/bench/pg_floor.c once per bench run; on failure
# the compiler's first line is in $tmp/err.
pg_floor() {
  [ -x "$tmp/pg_floor" ] ||
    cc -O2 -I"$(pg_config --includedir 2>/dev/null || echo /usr/include/postgresql)" -o "$tmp/pg_floor" \
      "$here/bench/pg_floor.c" -lpq 2>"$tmp/err"
}

# postgres_floor: a PostgreSQL lease run against pg_floor (libpq's connect, SCRAM and one
# durable upsert, then exec: the floor of any libpq-based lease tool) and `etcdctl lock`,
# interleaved on their own so the three rows are paired; goals: <= 1.0x etcdctl lock, and where
# the server's own connection cost (pg_floor / etcdctl lock) makes that impossible, <= 1.2x
# pg_floor.
postgres_floor() {
  local run="dblock -s lease run k -- true (vs floor)" floor="pg_floor k -- true (1 durable upsert)"
  say "servers: postgres floor"
  cell "$run" "$(dbl postgres -s lease run floor-lease -- true)"
  if pg_floor; then
    cell "$floor" "PG_FLOOR_DSN=$(printf %q "$postgres_dsn") $(printf %q "$tmp/pg_floor") true"
  else
    fail_row postgres "$floor" "cc: $(head -n 1 "$tmp/err")"
  fi
  [ -z "${etcd_endpoint:-}" ] || cell "etcdctl lock k true" "etcdctl --endpoints=$etcd_endpoint lock floor-etcd true"
  interleave postgres "$runs"
  ratio_row postgres "dblock lease / pg_floor" "$run" "$floor" 1.2
  [ -n "${etcd_endpoint:-}" ] || return 0  # etcd_start's row already says why
  ratio_row postgres "dblock lease / etcdctl lock" "$run" "etcdctl lock k true" 1.0
  ratio_row postgres "pg_floor / etcdctl lock" "$floor" "etcdctl lock k true"
}

#!/usr/bin/env bash
# A PostgreSQL row-lock handoff whose release reaches the server just after the waiter's wait
# slice ended (lock_timeout), the worst moment for a waiter that waits in slices: what the waiter
# sends between two slices is on the path. Two binaries, interleaved, through
# scripts/bench/delay_proxy.py on 127.0.0.1 (loopback only).
#
#   scripts/bench/slice_end.sh BIN_A BIN_B ROUNDS STRATEGY DELAY_MS [AFTER_MS]
#
# STRATEGY for-update or txn-insert; DELAY_MS each way (100: a 200 ms round trip); AFTER_MS how
# long after the slice's end the release should reach the server (default 20; "random": anywhere
# from 500 ms before it to 300 ms after, a release at any moment of the wait). Each round runs
# one handoff with each binary (the order alternating): a holder, a `run -w` waiter; once a
# slice of the waiter's wait has begun (pg_stat_activity, read on the server directly), the
# holder's command is let go so that its release, one way later, lands AFTER_MS after that
# slice's end (core's slice: 500 ms). Prints per handoff the binary, the handoff (holder's
# command ended -> waiter's started, ms) and where the release landed against the slice's end
# (its command's end + DELAY_MS, ms; the holder's own milliseconds come on top), then each
# binary's median, min and max, and the load.
# Needs DBLOCK_TEST_POSTGRES_DSN (source /tmp/shared-servers.env), psql and python3. With
# BACKEND=mysql, MariaDB (DBLOCK_TEST_MYSQL_DSN, the mariadb client): its head waiter's slice is
# its wait for the holder's wake name (GET_LOCK, in the block its lock statement goes behind),
# seen in information_schema.PROCESSLIST.
set -u
[ $# -ge 5 ] || { sed -n 2,21p "$0"; exit 2; }
bin_a=$1 bin_b=$2 rounds=$3 strategy=$4 delay=$5 after=${6:-20}
here=$(cd "$(dirname "$0")" && pwd)
backend=${BACKEND:-postgres}
if [ "$backend" = mysql ]; then
  dsn=${DBLOCK_TEST_MYSQL_DSN:?source /tmp/shared-servers.env}
else
  dsn=${DBLOCK_TEST_POSTGRES_DSN:?source /tmp/shared-servers.env}
fi
export DBLOCK_TABLE_PREFIX=${DBLOCK_TABLE_PREFIX:-bench_slice_}
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

port=$(python3 -c 'import sys, urllib.parse; u = urllib.parse.urlsplit(sys.argv[1]); print(u.port or {"mysql": 3306}.get(u.scheme, 5432))' "$dsn")
python3 "$here/delay_proxy.py" --target-port "$port" --delay-ms "$delay" --port-file "$tmp/proxy.port" \
  --lifetime 7200 >/dev/null &
proxy=$!
pids+=("$proxy")
for _ in $(seq 100); do [ -s "$tmp/proxy.port" ] && break; sleep 0.05; done
far=$(python3 -c '
import sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
netloc = u.netloc.rsplit("@", 1)
host = "127.0.0.1:" + sys.argv[2]
netloc = netloc[0] + "@" + host if len(netloc) == 2 else host
if u.scheme == "mysql":
    query = "&".join(q for q in u.query.split("&") if q and not q.startswith("ssl-"))
    query += ("&" if query else "") + "ssl-mode=DISABLED"
else:
    query = u.query + ("&" if u.query else "") + "sslmode=disable"
print(urllib.parse.urlunsplit((u.scheme, netloc, u.path, query, u.fragment)))' "$dsn" "$(cat "$tmp/proxy.port")")
if [ "$backend" = mysql ]; then
  # url PART: a part of the DSN (host, port, user, password, database).
  url() {
    python3 -c 'import sys, urllib.parse as p; u = p.urlsplit(sys.argv[1]); print(p.unquote({"port": str(u.port or 3306),
      "user": u.username or "", "password": u.password or "", "database": u.path.lstrip("/")}[sys.argv[2]]))' "$dsn" "$1"
  }
  my_args=(--host=127.0.0.1 "--port=$(url port)" "--user=$(url user)" "$(url database)")
  my_pwd=$(url password)
  sql() { MYSQL_PWD=$my_pwd mariadb "${my_args[@]}" -N -B -e "$1"; }
else
  sql() { psql "$dsn" -X -q -A -t -F $'\t' -c "$1"; }
fi
now_ms() { echo $(($(date +%s%N) / 1000000)); }
DBLOCK_DSN=$dsn "$bin_a" init >/dev/null || exit 1

# handoff BIN LABEL: one handoff; prints "LABEL GAP_MS LANDED_MS".
handoff() {
  local bin=$1 label=$2 k d q h w target start ports a
  k="slice-end-$label-$RANDOM$RANDOM"
  d=$tmp/$k
  mkdir -p "$d"
  DBLOCK_DSN=$far "$bin" -s "$strategy" run "$k" --ttl 60s -- \
    sh -c "while [ ! -e '$d/go' ]; do sleep 0.005; done; date +%s%N >'$d/end'" &
  h=$!
  pids+=("$h")
  for _ in $(seq 300); do DBLOCK_DSN=$dsn "$bin" -s "$strategy" status -q "$k" >/dev/null 2>&1 && break; sleep 0.05; done
  # Without -v: it would read who holds the key every second, a round trip between two slices
  # of its own; without it, on the first refusal and then every 5 s (past this handoff).
  DBLOCK_DSN=$far "$bin" -s "$strategy" run -w 60s "$k" -- sh -c "date +%s%N >'$d/start'" 2>"$d/err" &
  w=$!
  pids+=("$w")
  sleep "$(awk -v r="$delay" 'BEGIN { printf "%.2f", 0.6 + 12 * r / 1000 }')"
  # The waiter's lock statement in a slice that began less than 300 ms ago, on one of the
  # proxy's connections; the holder goes so that its release lands `after` ms past its end.
  for _ in $(seq 400); do
    if [ "$backend" = mysql ]; then
      # The head waiter's block, waiting in GET_LOCK for the key's wake name (mysql_names.cpp).
      q=$(sql "SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000 - TIME_MS AS INTEGER) FROM information_schema.PROCESSLIST
        WHERE DB = DATABASE() AND ID <> CONNECTION_ID() AND STATE LIKE '%user lock%'
        AND INFO LIKE CONCAT('%IS_USED_LOCK%dblock-wake:', LEFT(SHA2(CONCAT(DATABASE(), CHAR(0),
          '$DBLOCK_TABLE_PREFIX', CHAR(0), '$k'), 256), 52), '%') AND TIME_MS < 300 LIMIT 1")
    else
      ports=$(ss -Htnp state established "( dport = :$port )" | grep "pid=$proxy," |
        awk '{ n = split($3, a, ":"); printf "%s%s", sep, a[n]; sep = "," }')
      q=$(sql "SELECT (extract(epoch FROM query_start) * 1000)::bigint FROM pg_stat_activity
        WHERE state = 'active' AND wait_event_type = 'Lock' AND client_port IN (${ports:-0})
        AND query LIKE '%${DBLOCK_TABLE_PREFIX}claims%' AND clock_timestamp() - query_start < interval '300 ms' LIMIT 1")
    fi
    if [ -n "$q" ]; then
      a=$after
      [ "$after" = random ] && a=$((RANDOM % 800 - 500))  # anywhere from 500 ms before the end to 300 after
      target=$((q + 500 + a - delay - 5))
      [ "$target" -gt "$(($(now_ms) + 5))" ] && break
    fi
    q=""
    sleep 0.01
  done
  [ -n "$q" ] || { echo "$label: the waiter never waited in a slice" >&2; touch "$d/go"; wait "$h" "$w"; return 1; }
  start=$(now_ms)
  sleep "$(awk -v t="$((target - start))" 'BEGIN { printf "%.3f", t / 1000 }')"
  touch "$d/go"
  wait "$h" "$w"
  if [ -s "$d/end" ] && [ -s "$d/start" ]; then
    echo "$label $((($(cat "$d/start") - $(cat "$d/end")) / 1000000)) $(($(cat "$d/end") / 1000000 + delay - q - 500))"
  else
    echo "$label: a command did not run" >&2
  fi
}

for r in $(seq "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then
    handoff "$bin_a" A
    handoff "$bin_b" B
  else
    handoff "$bin_b" B
    handoff "$bin_a" A
  fi
  echo "load $(cut -d' ' -f1 /proc/loadavg)"
done | tee "$tmp/out"
for l in A B; do
  awk -v l="$l" '$1 == l { print $2 }' "$tmp/out" | sort -n | awk -v l="$l" -v s="$strategy" -v r="$((2 * delay))" '
    { v[NR] = $1 } END { if (NR) printf "%s %s at %d ms round trip: median %s ms, min %s, max %s, n %d\n", l, s, r,
      (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), v[1], v[NR], NR }'
done
awk '$1 == "load" { print $2 }' "$tmp/out" | sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "load %s-%s\n", v[1], v[NR] }'

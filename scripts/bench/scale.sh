# shellcheck shell=bash
# Section "scale": does a run get slower as the tables grow? Per backend (lease strategy), a run
# and `history KEY` with 10^2 rows in the locks and runs tables against $scale_rows (10^6) rows,
# interleaved; peak RSS of both with the big tables. The tables are filled by one
# INSERT ... SELECT each (recursive CTE, MariaDB's seq_1_to_N, generate_series). Sourced.

# fill BACKEND PREFIX ROWS: fresh tables under PREFIX with ROWS released leases ('key-1'...) and
# ROWS history rows spread over 1000 keys (so 'key-7' has ROWS/1000 of them), their tokens as
# runs would have left them: a key's k-th row has token k, and each lock's token is past them.
fill() {
  local b=$1 p=$2 n=$3 old=2020-01-01 sql
  case $b in
    sqlite)
      rm -f "$tmp/scale-$p.db"
      sql="WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $n)
             INSERT INTO ${p}locks (name, token, strategy, acquired_at, expires_at, released_at)
             SELECT 'key-' || i, $n / 1000 + 1, 'lease', '$old 00:00:00.000', '$old 00:00:01.000', '$old 00:00:01.000' FROM n;
           WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $n)
             INSERT INTO ${p}runs (name, token, strategy, started_at, finished_at, outcome, exit_code)
             SELECT 'key-' || (i % 1000), i / 1000 + 1, 'lease', '$old 00:00:00.000', '$old 00:00:01.000', 'ok', 0 FROM n;"
      DBLOCK_TABLE_PREFIX=$p DBLOCK_DSN="sqlite:$tmp/scale-$p.db" "$bin" init >/dev/null &&
        sqlite3 -batch "$tmp/scale-$p.db" "$sql"
      ;;
    mysql)
      drop_tables mysql "$p" &&
        DBLOCK_TABLE_PREFIX=$p DBLOCK_DSN=$mysql_dsn "$bin" init >/dev/null &&
        my "INSERT INTO ${p}locks (name, token, strategy, acquired_at, expires_at, released_at)
              SELECT CONCAT('key-', seq), $n DIV 1000 + 1, 'lease', '$old 00:00:00', '$old 00:00:01', '$old 00:00:01' FROM seq_1_to_$n;
            INSERT INTO ${p}runs (name, token, strategy, started_at, finished_at, outcome, exit_code)
              SELECT CONCAT('key-', seq % 1000), seq DIV 1000 + 1, 'lease', '$old 00:00:00', '$old 00:00:01', 'ok', 0 FROM seq_1_to_$n;
            ANALYZE TABLE ${p}locks, ${p}runs" >/dev/null
      ;;
    postgres)
      drop_tables postgres "$p" &&
        DBLOCK_TABLE_PREFIX=$p DBLOCK_DSN=$postgres_dsn "$bin" init >/dev/null &&
        pg "INSERT INTO ${p}locks (name, token, strategy, acquired_at, expires_at, released_at)
              SELECT 'key-' || i, $n / 1000 + 1, 'lease', '$old 00:00:00+00', '$old 00:00:01+00', '$old 00:00:01+00' FROM generate_series(1, $n) i" &&
        pg "INSERT INTO ${p}runs (name, token, strategy, started_at, finished_at, outcome, exit_code)
              SELECT 'key-' || (i % 1000), i / 1000 + 1, 'lease', '$old 00:00:00+00', '$old 00:00:01+00', 'ok', 0 FROM generate_series(1, $n) i" &&
        # VACUUM as autovacuum would have long since done on a database that grew this big: right
        # after a bulk load there is no visibility map, so every index-only scan (the history
        # trim's cutoff) fetches its heap pages and the 10^6 cell measures the load, not dblock.
        pg "VACUUM ANALYZE ${p}locks" && pg "VACUUM ANALYZE ${p}runs"
      ;;
  esac
}

# scaled BACKEND PREFIX ARGS...: a dblock command string on BACKEND's tables under PREFIX.
scaled() {
  local b=$1 p=$2
  shift 2
  printf 'DBLOCK_TABLE_PREFIX=%q ' "$p"
  if [ "$b" = sqlite ]; then
    printf 'DBLOCK_DSN=%q %q' "sqlite:$tmp/scale-$p.db" "$bin"
    printf ' %q' "$@"
  else
    dbl "$b" "$@"
  fi
}

section_scale() {
  local b t0 small=${DBLOCK_TABLE_PREFIX}s_ big=${DBLOCK_TABLE_PREFIX}b_ nb
  # 10^6 rather than 1000000 when the row count is a power of ten
  nb=$(awk -v n="$scale_rows" 'BEGIN { e = log(n) / log(10); r = sprintf("%.0f", e)
                                       print (n == 10 ^ r && n >= 100 ? "10^" r : n) }')
  for b in $(backends_on); do
    say "scale: $b (filling $nb rows)"
    t0=${EPOCHREALTIME/./}
    if ! { fill "$b" "$small" 100 && fill "$b" "$big" "$scale_rows"; } >/dev/null 2>"$tmp/err"; then
      fail_row scale "$b: fill" "$(grep -v '^$' "$tmp/err" | head -n 1)"
      continue
    fi
    result scale "$b: fill 2 tables x $nb rows" s "$(awk -v us=$((${EPOCHREALTIME/./} - t0)) 'BEGIN { printf "%.1f", us / 1e6 }')" "" "" 1 "one INSERT ... SELECT per table"
    cell "$b: run key-7 -- true, 10^2 keys" "$(scaled "$b" "$small" run key-7 -- true)"
    cell "$b: run key-7 -- true, $nb keys" "$(scaled "$b" "$big" run key-7 -- true)"
    cell "$b: history key-7, 10^2 runs" "$(scaled "$b" "$small" history key-7)"
    cell "$b: history key-7, $nb runs" "$(scaled "$b" "$big" history key-7)"
    interleave scale "$runs"
    ratio_row scale "$b: run, $nb / 10^2 keys" "$b: run key-7 -- true, $nb keys" "$b: run key-7 -- true, 10^2 keys" 1.2
    ratio_row scale "$b: history, $nb / 10^2 runs" "$b: history key-7, $nb runs" "$b: history key-7, 10^2 runs" 1.2
    peak_rss scale "$b: peak RSS, run key-7 -- true, $nb keys" "$rss_runs" "$(scaled "$b" "$big" run key-7 -- true)"
    peak_rss scale "$b: peak RSS, history key-7, $nb runs" "$rss_runs" "$(scaled "$b" "$big" history key-7)"
    # The big tables are dropped so a server keeps no 10^6-row leftovers between benches.
    [ "$b" = sqlite ] || drop_tables "$b" "$big" >/dev/null 2>&1 || true
  done
}

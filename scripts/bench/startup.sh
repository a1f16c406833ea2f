# shellcheck shell=bash
# Sections "startup" and "fsync": local start-up cost and SQLite's fsync-class calls. Sourced.

# startup: `dblock --version` and `dblock --help` (start-up alone: parse, print, exit; neither
# loads a module) and `dblock run k -- true` on SQLite against `flock FILE true`, and the
# hand-written sqlite3 lease and sqlite_floor.c (the durable minimum: one durable commit, one unsynced, and
# the command's fork and exec, nothing else), interleaved; peak RSS of a run.
section_startup() {
  say "startup"
  local db
  eval "$(dbl sqlite init)" >/dev/null 2>"$tmp/err" || { fail_row startup "dblock init (SQLite)" "$(head -n 1 "$tmp/err")"; return 0; }
  db=$(peer_sqlite_db) || { fail_row startup "dblock init (the sqlite3 script's file)" "$(head -n 1 "$tmp/err")"; return 0; }
  cell "flock FILE true" "flock $(printf %q "$tmp/flock") true"
  cell "dblock --help" "$(printf %q "$bin") --help"
  cell "dblock --version" "$(printf %q "$bin") --version"
  cell "dblock run k -- true (SQLite)" "$(dbl sqlite run k -- true)"
  if sqlite_floor; then
    cell "sqlite_floor k -- true (1 durable commit)" "$(printf %q "$tmp/sqlite_floor") $(printf %q "$tmp/floor.db") true"
  else
    fail_row startup "sqlite_floor k -- true (1 durable commit)" "cc: $(head -n 1 "$tmp/err")"
  fi
  cell "sqlite_lease.sh k 60 -- true" "LEASE_TABLE=${DBLOCK_TABLE_PREFIX}locks $(printf %q "$here/bench/sqlite_lease.sh") $(printf %q "$db") k-sh 60 -- true"
  interleave startup "$runs"
  ratio_row startup "dblock --help / flock" "dblock --help" "flock FILE true" 1.2
  ratio_row startup "dblock --version / flock" "dblock --version" "flock FILE true" 1.2
  ratio_row startup "dblock run (SQLite) / flock" "dblock run k -- true (SQLite)" "flock FILE true" 1.5
  ratio_row startup "sqlite_floor / flock" "sqlite_floor k -- true (1 durable commit)" "flock FILE true"
  ratio_row startup "dblock run (SQLite) / sqlite_floor" "dblock run k -- true (SQLite)" "sqlite_floor k -- true (1 durable commit)"
  ratio_row startup "sqlite_lease.sh / dblock run (SQLite)" "sqlite_lease.sh k 60 -- true" "dblock run k -- true (SQLite)"
  peak_rss startup "peak RSS, dblock run k -- true (SQLite)" "$rss_runs" "$(dbl sqlite run k -- true)"
  peak_rss startup "peak RSS, flock FILE true" "$rss_runs" "flock $(printf %q "$tmp/flock") true"
  rss_anon startup "RssAnon, dblock run k (SQLite)" "$rss_runs" "$(dbl sqlite run k)"
}

fsync_syscalls=fsync,fdatasync,sync_file_range,msync

# sqlite_floor: builds $tmp/sqlite_floor from scripts/bench/sqlite_floor.c once per bench run;
# on failure the compiler's first line is in $tmp/err.
sqlite_floor() {
  [ -x "$tmp/sqlite_floor" ] || cc -O2 -o "$tmp/sqlite_floor" "$here/bench/sqlite_floor.c" -lsqlite3 2>"$tmp/err"
}

# peer_sqlite_db: the file the hand-written sqlite3 lease runs on, made by `dblock init` (dblock's
# tables) but not dblock's own: the sqlite3 shell, as the last connection to close, checkpoints
# the WAL into the database and deletes it, so on a shared file every dblock run after it would
# make its WAL afresh (4 fsync-class calls instead of 2, and the file creations): a cost of the
# neighbour, not of dblock.
peer_sqlite_db() {
  local db=$tmp/sqlite_lease.db
  DBLOCK_DSN="sqlite:$db" "$bin" init >/dev/null 2>"$tmp/err" || return 1
  echo "$db"
}

# fsync: steady state (schema made, the key's row exists: a warm-up run precedes each count).
section_fsync() {
  say "fsync"
  if ! command -v strace >/dev/null; then
    fail_row fsync "all" "no strace (apt-get install strace)"
    return 0
  fi
  eval "$(dbl sqlite init)" >/dev/null 2>&1 || true
  eval "$(dbl sqlite run fsync-k -- true)" >/dev/null 2>&1 || true
  syscalls_per_run fsync "$fsync_syscalls" "fsync-class calls, dblock run k -- true (SQLite)" "$(dbl sqlite run fsync-k -- true)"
  local db
  db=$(peer_sqlite_db) || { fail_row fsync "dblock init (the sqlite3 script's file)" "$(head -n 1 "$tmp/err")"; return 0; }
  eval "LEASE_TABLE=${DBLOCK_TABLE_PREFIX}locks $(printf %q "$here/bench/sqlite_lease.sh") $(printf %q "$db") fsync-sh 60 -- true" >/dev/null 2>&1 || true
  syscalls_per_run fsync "$fsync_syscalls" "fsync-class calls, sqlite_lease.sh k 60 -- true" \
    "LEASE_TABLE=${DBLOCK_TABLE_PREFIX}locks $(printf %q "$here/bench/sqlite_lease.sh") $(printf %q "$db") fsync-sh 60 -- true"
  if sqlite_floor; then
    "$tmp/sqlite_floor" "$tmp/floor-fsync.db" true >/dev/null 2>&1 || true
    syscalls_per_run fsync "$fsync_syscalls" "fsync-class calls, sqlite_floor k -- true" \
      "$(printf %q "$tmp/sqlite_floor") $(printf %q "$tmp/floor-fsync.db") true"
  else
    fail_row fsync "fsync-class calls, sqlite_floor k -- true" "cc: $(head -n 1 "$tmp/err")"
  fi
  syscalls_per_run fsync "$fsync_syscalls" "fsync-class calls, flock FILE true" "flock $(printf %q "$tmp/flock") true"
}

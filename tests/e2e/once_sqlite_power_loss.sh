#!/usr/bin/env bash
# SQLite: one durable write per run (man/dblock.1, "SQLite durability"). The acquisition's
# commit is the only one synced: strace sees one fsync-class call per run, made before the
# command starts. A power loss may therefore lose everything the run wrote after it (the
# release, the history row). The command snapshots the database files while the acquisition is
# all that is synced; putting them back after the run is that loss, and what the next runs see
# of it must be right: the key held by the lost run until its lease ends, then taken with a
# greater token, --min-interval still counting the lost start, and an intact file. A second
# copy gets the release's frames half written (a torn append), which must read the same.
source "$(dirname "$0")/lib.sh"

command -v strace >/dev/null || skip_or_fail "strace is needed to see the fsyncs (scripts/install-deps.sh)"
strace -f -o /dev/null true 2>/dev/null || skip_or_fail "strace cannot trace here (ptrace not permitted)"

db="$E2E_TMP/power.db"
snap="$E2E_TMP/snap"
mkdir -p "$snap"
export DBLOCK_DSN="sqlite:$db"

assert_status "the first run" 0 dblock run k -- true
assert_status "the second run" 0 dblock run k -- true

# The command: the files as they are once the acquisition has committed, and its token.
cat >"$E2E_TMP/snapshot.sh" <<EOF
#!/bin/sh
cp "$db" "$snap/db" && cp "$db-wal" "$snap/db-wal" && echo "\$DBLOCK_TOKEN" >"$snap/token"
EOF
chmod +x "$E2E_TMP/snapshot.sh"

trace="$E2E_TMP/trace"
strace -f -qq -o "$trace" -e trace=fsync,fdatasync,sync_file_range,msync,execve \
  dblock run --ttl 10s k -- "$E2E_TMP/snapshot.sh" >/dev/null 2>&1
rc=$?
assert_eq "the run to lose" 0 "$rc"
lost_token=$(cat "$snap/token" 2>/dev/null)
assert_eq "the lost run's token" 3 "$lost_token"

syncs=$(grep -cE '^[0-9]+ +(fsync|fdatasync|sync_file_range|msync)\(' "$trace")
assert_eq "a run issues one fsync-class call (the acquisition's commit)" 1 "$syncs"
command_line=$(grep -nE '^[0-9]+ +execve\("[^"]*snapshot\.sh"' "$trace" | head -n 1 | cut -d: -f1)
after=$(tail -n +"${command_line:-1}" "$trace" | grep -cE '^[0-9]+ +(fsync|fdatasync|sync_file_range|msync)\(')
assert_eq "no fsync-class call once the command has started (release and history are not synced)" 0 "$after"
assert_eq "before the loss, the run's history row is there" 3 "$(history_field k runs.#)"

# A copy whose log has the release's frames half written: SQLite must ignore them.
torn="$E2E_TMP/torn.db"
cp "$snap/db" "$torn"
full_size=$(stat -c %s "$db-wal")
snap_size=$(stat -c %s "$snap/db-wal")
head -c $(((snap_size + full_size) / 2)) "$db-wal" >"$torn-wal"
check "the release appended to the log (the torn copy has part of it)" test "$full_size" -gt "$snap_size"

# The power loss: the files as the acquisition's commit left them; the wal-index is rebuilt.
cp "$snap/db" "$db"
cp "$snap/db-wal" "$db-wal"
rm -f "$db-shm"

assert_eq "after the loss, status shows the lost run's lease" "held 3" "$(status_field k state token)"
assert_eq "after the loss, its release is gone" "null" "$(status_field k released_at)"
assert_eq "after the loss, its history row is gone" "2 2" "$(history_field k runs.# runs.0.token)"
assert_status "the lost run's lease still excludes" 75 dblock run -w 0 k -- true
assert_eq "the torn copy reads as the lost run's lease" "3 null" \
  "$(dblock --dsn "sqlite:$torn" status k --json | json_field locks.0.token locks.0.released_at)"

check "the lost run's lease expires" wait_for 20 eval '[ "$(status_field k state)" = expired ]'
assert_status "--min-interval still counts the lost run's start" 75 dblock run --min-interval 1h k -- true
cat >"$E2E_TMP/token.sh" <<EOF
#!/bin/sh
echo "\$DBLOCK_TOKEN" >"$E2E_TMP/next_token"
EOF
chmod +x "$E2E_TMP/token.sh"
assert_status "the key is taken again once the lease has expired" 0 dblock run k -- "$E2E_TMP/token.sh"
next_token=$(cat "$E2E_TMP/next_token" 2>/dev/null)
check "with a greater token ($next_token > $lost_token)" test "${next_token:-0}" -gt "${lost_token:-0}"
assert_eq "status after the next run" "free $next_token" "$(status_field k state token)"
assert_eq "history after the next run" "3 $next_token 2" "$(history_field k runs.# runs.0.token runs.1.token)"

integrity() { sqlite3 "$1" 'PRAGMA integrity_check'; }
assert_eq "PRAGMA integrity_check" ok "$(integrity "$db")"
assert_eq "PRAGMA integrity_check of the torn copy" ok "$(integrity "$torn")"

finish

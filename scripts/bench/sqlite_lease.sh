#!/usr/bin/env bash
# The baseline scripts/bench.sh measures `dblock run KEY -- CMD` on SQLite against: the same
# lease, written by hand with the sqlite3 shell on dblock's own locks table. One conditional
# upsert acquires and returns the token, the command runs, one owner- and token-checked update
# releases. Deliberately minimal: no heartbeat, no waiting, no history row, no signal
# forwarding: the floor a careful shell script pays, not a replacement for dblock.
#   [LEASE_TABLE=dblock_locks] sqlite_lease.sh DBFILE KEY TTL_SECONDS -- CMD...
# Exit: 75 busy, 76 lease gone at release, else CMD's.
set -euo pipefail

[ $# -ge 4 ] || { echo "usage: sqlite_lease.sh DBFILE KEY TTL_SECONDS -- CMD..." >&2; exit 64; }
db=$1 key=$2 ttl=$3
shift 3
[ "$1" = -- ] && shift
table=${LEASE_TABLE:-dblock_locks}
[[ $table =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || { echo "sqlite_lease.sh: bad table name" >&2; exit 64; }
[[ $ttl =~ ^[1-9][0-9]*$ ]] || { echo "sqlite_lease.sh: TTL must be whole seconds" >&2; exit 64; }
# Values go in as hex blobs cast to text: no quoting or escaping can go wrong, whatever the key holds.
hex() { printf "CAST(X'%s' AS TEXT)" "$(printf '%s' "$1" | od -An -tx1 -v | tr -d ' \n')"; }
k=$(hex "$key")
owner=$(hex "sh:$HOSTNAME:$$")
host=$(hex "$HOSTNAME")
# A busy database waits up to 5 s, like dblock's own busy timeout; the write lock is taken at
# BEGIN IMMEDIATE so the upsert never has to upgrade a read lock.
sql() { sqlite3 -batch -noheader -cmd '.timeout 5000' "$db" "$1"; }
now="strftime('%Y-%m-%d %H:%M:%f', 'now')"

token=$(sql "
INSERT INTO $table AS l (name, owner, host, pid, token, strategy, acquired_at, renewed_at, expires_at, last_started_at)
VALUES ($k, $owner, $host, $$, 1, 'lease', $now, $now, strftime('%Y-%m-%d %H:%M:%f', 'now', '+$ttl seconds'), $now)
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, host = excluded.host, pid = excluded.pid,
  token = l.token + 1, strategy = 'lease', session_id = NULL, acquired_at = $now, renewed_at = $now,
  expires_at = excluded.expires_at, released_at = NULL, last_started_at = $now
WHERE l.expires_at IS NULL OR l.expires_at <= $now
RETURNING token;")
[ -n "$token" ] || { echo "sqlite_lease.sh: $key is held" >&2; exit 75; }

rc=0
"$@" || rc=$?

released=$(sql "
UPDATE $table SET released_at = $now, expires_at = $now, last_finished_at = $now, last_exit_code = $rc
WHERE name = $k AND owner = $owner AND token = $token AND released_at IS NULL
RETURNING 1;")
[ "$released" = 1 ] || { echo "sqlite_lease.sh: lost the lease on $key" >&2; exit 76; }
exit "$rc"

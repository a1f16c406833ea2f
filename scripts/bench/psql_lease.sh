#!/usr/bin/env bash
# The baseline scripts/bench.sh measures `dblock run KEY -- CMD` against: the same lease, written
# by hand with psql on dblock's own locks table. One conditional upsert acquires and returns
# the token, the command runs, one owner- and token-checked update releases. Deliberately
# minimal: no heartbeat, no waiting, no history row, no signal forwarding, no NOTIFY for
# waiters: the floor a careful shell script pays, not a replacement for dblock.
#   [LEASE_TABLE=dblock_locks] psql_lease.sh KEY TTL_SECONDS -- CMD...
# The connection comes from libpq's environment (PGHOST, PGPORT, PGUSER, PGDATABASE, and
# ~/.pgpass or PGPASSWORD), never the command line. Exit: 75 busy, 76 lease gone at release,
# else CMD's.
set -euo pipefail

[ $# -ge 3 ] || { echo "usage: psql_lease.sh KEY TTL_SECONDS -- CMD..." >&2; exit 64; }
key=$1 ttl=$2
shift 2
[ "$1" = -- ] && shift
[[ $ttl =~ ^[1-9][0-9]*$ ]] || { echo "psql_lease.sh: TTL must be whole seconds" >&2; exit 64; }
owner="sh:$HOSTNAME:$$"
# psql quotes :'var' as a literal and :"var" as an identifier, so nothing is spliced raw.
sql() {
  psql -X -q -A -t -v ON_ERROR_STOP=1 -v table="${LEASE_TABLE:-dblock_locks}" -v key="$key" -v owner="$owner" \
    -v host="$HOSTNAME" -v pid="$$" "$@"
}

token=$(sql -v ttl="$ttl" <<'SQL'
INSERT INTO :"table" AS l (name, owner, host, pid, token, strategy, acquired_at, renewed_at, expires_at, last_started_at)
VALUES (:'key', :'owner', :'host', :'pid', 1, 'lease', now(), now(), now() + :'ttl' * interval '1 s', now())
ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, host = EXCLUDED.host, pid = EXCLUDED.pid,
  token = l.token + 1, strategy = 'lease', session_id = NULL, acquired_at = now(), renewed_at = now(),
  expires_at = EXCLUDED.expires_at, released_at = NULL, last_started_at = now()
WHERE l.expires_at IS NULL OR l.expires_at <= now()
RETURNING token;
SQL
)
[ -n "$token" ] || { echo "psql_lease.sh: $key is held" >&2; exit 75; }

rc=0
"$@" || rc=$?

released=$(sql -v token="$token" -v rc="$rc" <<'SQL'
UPDATE :"table" SET released_at = now(), expires_at = now(), last_finished_at = now(), last_exit_code = :'rc'
WHERE name = :'key' AND owner = :'owner' AND token = :'token' AND released_at IS NULL
RETURNING 1;
SQL
)
[ "$released" = 1 ] || { echo "psql_lease.sh: lost the lease on $key" >&2; exit 76; }
exit "$rc"

#!/usr/bin/env bash
# The baseline scripts/bench.sh measures `dblock run KEY -- CMD` against: the same lease, written
# by hand with the mariadb/mysql client on dblock's own locks table. One conditional upsert
# acquires (the client has no affected-rows output, so `SELECT ROW_COUNT(), LAST_INSERT_ID()`
# follows in the same client call), the command runs, one owner- and token-checked update
# releases. Deliberately minimal: no heartbeat, no waiting, no history row, no signal
# forwarding, no NOTIFY: the floor a careful shell script pays, not a replacement for dblock.
#   MYSQL_LEASE_CNF=FILE [LEASE_TABLE=dblock_locks] mysql_lease.sh KEY TTL_SECONDS -- CMD...
# FILE is a client option file ([client] host, port, user, password, database), so the
# password is never on a command line. Exit: 75 busy, 76 lease gone at release, else CMD's.
set -euo pipefail

[ $# -ge 3 ] || { echo "usage: mysql_lease.sh KEY TTL_SECONDS -- CMD..." >&2; exit 64; }
key=$1 ttl=$2
shift 2
[ "$1" = -- ] && shift
table=${LEASE_TABLE:-dblock_locks}
[[ $table =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || { echo "mysql_lease.sh: bad table name" >&2; exit 64; }
[[ $ttl =~ ^[1-9][0-9]*$ ]] || { echo "mysql_lease.sh: TTL must be whole seconds" >&2; exit 64; }
client=$(command -v mariadb || command -v mysql)
sql() { "$client" --defaults-extra-file="${MYSQL_LEASE_CNF:?}" -N -B -e "$1"; }
# Values go in as hex literals: no quoting or escaping can go wrong, whatever the key holds.
hex() { printf "X'%s'" "$(printf '%s' "$1" | od -An -tx1 -v | tr -d ' \n')"; }
k=$(hex "$key")
owner=$(hex "sh:$HOSTNAME:$$")
host=$(hex "$HOSTNAME")

# Every column takes its new value only when the lease is over; expires_at, which the
# condition reads, is assigned last (MySQL/MariaDB assign left to right).
free="(expires_at IS NULL OR expires_at <= NOW(6))"
read -r rows token < <(sql "
INSERT INTO $table (name, owner, host, pid, token, strategy, acquired_at, renewed_at, expires_at, last_started_at)
VALUES ($k, $owner, $host, $$, 1, 'lease', NOW(6), NOW(6), NOW(6) + INTERVAL $ttl SECOND, NOW(6))
ON DUPLICATE KEY UPDATE
  owner = IF($free, VALUES(owner), owner), host = IF($free, VALUES(host), host), pid = IF($free, VALUES(pid), pid),
  strategy = IF($free, 'lease', strategy), session_id = IF($free, NULL, session_id),
  acquired_at = IF($free, NOW(6), acquired_at), renewed_at = IF($free, NOW(6), renewed_at),
  released_at = IF($free, NULL, released_at), last_started_at = IF($free, NOW(6), last_started_at),
  token = IF($free, LAST_INSERT_ID(token + 1), token), expires_at = IF($free, VALUES(expires_at), expires_at);
SELECT ROW_COUNT(), LAST_INSERT_ID();")
case $rows in
  1) token=1 ;;         # inserted a fresh row
  2) ;;                 # took over a free row; LAST_INSERT_ID() is the new token
  *) echo "mysql_lease.sh: $key is held" >&2; exit 75 ;;
esac

rc=0
"$@" || rc=$?

gone=$(sql "
UPDATE $table SET released_at = NOW(6), expires_at = NOW(6), last_finished_at = NOW(6), last_exit_code = $rc
WHERE name = $k AND owner = $owner AND token = $token AND released_at IS NULL;
SELECT ROW_COUNT() = 0;")
[ "$gone" = 0 ] || { echo "mysql_lease.sh: lost the lease on $key" >&2; exit 76; }
exit "$rc"

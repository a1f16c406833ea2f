#!/usr/bin/env bash
# cells: (mysql|postgres):.*
# A server that ends idle sessions (MariaDB wait_timeout=2; PostgreSQL idle_session_timeout and
# idle_in_transaction_session_timeout of 1 s) does not drop a held lock of this cell's strategy:
# throughout an 8 s command, sampled every ~0.3 s, status says held and a competing run exits
# 75; the command exits 0. (SQLite has no server and no idle killer: servers' cells only.)
source "$(dirname "$0")/lib.sh"

k=$(key idle)
holder_dsn=$DBLOCK_DSN
case "$DBLOCK_TEST_BACKEND" in
  mysql)
    command -v mariadb >/dev/null || skip_or_fail "no mariadb client to set wait_timeout with"
    # wait_timeout is server-wide, but a connection keeps the value it started with: lowered
    # only until the holder's connections are open, so parallel tests are hardly touched. Two
    # scripts overlapping could save each other's 2: never put back less than the default.
    saved=$(server_sql "SELECT @@GLOBAL.wait_timeout") || { fail "cannot query the server"; finish; }
    [ "${saved:-0}" -gt 2 ] || saved=28800
    restore() { server_sql "SET GLOBAL wait_timeout = $saved" || echo "WARNING: could not restore wait_timeout=$saved"; }
    trap 'restore; e2e_cleanup' EXIT
    check "SET GLOBAL wait_timeout = 2" server_sql "SET GLOBAL wait_timeout = 2"
    ;;
  postgres)
    holder_dsn="$DBLOCK_DSN$(case $DBLOCK_DSN in *\?*) echo '&' ;; *) echo '?' ;; esac)options=-c%20idle_session_timeout%3D1000%20-c%20idle_in_transaction_session_timeout%3D1000"
    ;;
esac

start_bg holder env DBLOCK_DSN="$holder_dsn" dblock run "$k" -- sh -c 'touch "$0"; sleep 8' "$E2E_TMP/started" \
  2>"$E2E_TMP/err"
check "the holder started" wait_for 10 test -e "$E2E_TMP/started"
check "the holder shows as held" wait_for 10 is_held "$k"
[ "$DBLOCK_TEST_BACKEND" = mysql ] && restore

samples=0
bad=""
deadline=$((SECONDS + 20))
while [ "$SECONDS" -lt "$deadline" ] && kill -0 "$holder" 2>/dev/null; do
  st=0; dblock status -q "$k" >/dev/null 2>&1 || st=$?
  rc=0; dblock run "$k" -- true 2>/dev/null || rc=$?
  kill -0 "$holder" 2>/dev/null || break  # finished meanwhile: not a sample
  samples=$((samples + 1))
  [ "$st" = 0 ] && [ "$rc" = 75 ] || bad+=" status=$st,run=$rc@$SECONDS"
  sleep 0.3
done
wait_exit rc "$holder" 5
assert_eq "the 8 s command under the idle killers exits 0 ($(head -c 200 "$E2E_TMP/err"))" 0 "$rc"
assert_between "sampled the lock $samples times" 5 1000 "$samples"
assert_eq "held and refusing competitors throughout" "" "$bad"

finish

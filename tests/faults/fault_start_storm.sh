#!/usr/bin/env bash
# The 02:00 start storm (issue 30): $STORM_CONTENDERS `dblock run` on one key, released at the
# same instant, without -w, through an account that may hold only 40 connections (PostgreSQL:
# CONNECTION LIMIT 40, SQLSTATE 53300; MariaDB: MAX_USER_CONNECTIONS 40, errno 1226), as a
# server with max_connections=40 would. Exactly one runs its command; every other one skips
# quietly (exit 75), none fails with 69, and all of them are out well before the winner's
# command ends. The per-account limit, not the server's, so the shared test servers serve other
# tests meanwhile; scripts/bench.sh (section storm) measures 1,000 against max_connections=40.
source "$(dirname "$0")/lib.sh"
server_control_required

contenders=${STORM_CONTENDERS:-200}
# The winner's command ends once the others are out (below), so its cap costs nothing unless a
# loser waits for it: 20 s was outlasted by a storm's start alone (200 PostgreSQL contenders with
# two busy loops on the 2 cores: the last out at 25.4 and 26.2 s, every one of them 75).
job_s=60
k=$(key storm)
account=dblock_storm_$$
password=storm-pw-$$
limited_account "$account" "$password" 40 || { fail "create an account limited to 40 connections"; finish; }
trap 'e2e_cleanup; restore' EXIT
dblock init >/dev/null || { fail "dblock init as the limited account"; finish; }

# The winner's command lasts until every other contender has exited (storm.py's only child left
# is the winner's dblock), $job_s s at most: a storm whose losers waited for the winner's
# command would see it end at $job_s s, after the bound below. (A fixed $job_s s command made
# every run of this RUN_SERIAL test last $job_s s, though the losers are out in a few.)
cat >"$E2E_TMP/job.sh" <<'SH'
#!/bin/sh
# job.sh PID_FILE SECONDS: until PID_FILE's process has at most one child left, SECONDS at most.
i=0
while [ "$i" -lt "$(($2 * 10))" ]; do
  if [ -s "$1" ] && [ "$(pgrep -c -P "$(cat "$1")")" -le 1 ]; then exit 0; fi
  sleep 0.1
  i=$((i + 1))
done
SH
chmod +x "$E2E_TMP/job.sh"
python3 "$DBLOCK_SOURCE_DIR/scripts/bench/storm.py" "$contenders" "$E2E_TMP/exits" "$E2E_TMP/err" -- \
  "$DBLOCK_BIN" run "$k" -- "$E2E_TMP/job.sh" "$E2E_TMP/storm.pid" "$job_s" >"$E2E_TMP/summary" &
storm=$!
remember_pid "$storm"
echo "$storm" >"$E2E_TMP/storm.pid"
wait "$storm"
echo "    $contenders contenders: $(cat "$E2E_TMP/summary")"
count() { awk -v c="$1" '$1 == c { n++ } END { print n + 0 }' "$E2E_TMP/exits"; }
assert_eq "exactly one contender ran the command" 1 "$(count 0)"
assert_eq "every other contender skipped (exit 75)" $((contenders - 1)) "$(count 75)"
assert_eq "no contender failed otherwise (69: too many connections)" 0 \
  "$(awk '$1 != 0 && $1 != 75 { n++ } END { print n + 0 }' "$E2E_TMP/exits")"
# Generous: 2 cores may take seconds to start 2 x $contenders processes. The bound that
# matters is that nobody waited for the winner's command.
last_loser=$(awk '$1 != 0 && $2 > m { m = $2 } END { print m + 0 }' "$E2E_TMP/exits")
assert_between "the last of the others exits before the winner's ${job_s} s command ends (ms)" 0 \
  $((job_s * 1000 - 2000)) "$last_loser"
grep -v '^$' "$E2E_TMP/err" | sort | uniq -c | sort -rn | head -n 3 | sed 's/^/    /'
finish

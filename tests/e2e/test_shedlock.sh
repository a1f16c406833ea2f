#!/usr/bin/env bash
# --table-format shedlock: dblock shares a lock with Java services that use ShedLock. The "Java
# side" here issues the exact statements of ShedLock 5.x's JDBC provider with usingDbTime()
# (JdbcTemplateLockProvider: MySqlServerTimeStatementsSource, PostgresSqlServerTimeStatementsSource;
# on SQLite, which ShedLock has no server-time dialect for, its generic statements with
# SQLite's clock) through the server's own client, interleaved with dblock.
source "$(dirname "$0")/lib.sh"

T="${DBLOCK_TABLE_PREFIX}shedlock"
shed() { dblock --table-format shedlock --table "$T" "$@"; }

# A ShedLock row is a lease: every other strategy is refused with 78 and the reason.
if is_session_strategy; then
  assert_status "strategy $DBLOCK_STRATEGY with --table-format shedlock exits 78" 78 shed run "$(key refused)" -- true
  check "the message names the lease" sh -c "dblock --table-format shedlock run x -- true 2>&1 | grep -q 'only with --strategy lease'"
  finish
fi
assert_status "--strategy advisory with --table-format shedlock exits 78" 78 shed --strategy advisory run "$(key adv)" -- true

# The Java side: ShedLock's statements, with its parameters (name, lockedBy, lockAtMostFor and
# lockAtLeastFor in ms) written in. Each prints the rows it changed.
java_sql() {
  case "$DBLOCK_TEST_BACKEND" in
    sqlite) timeout 10 sqlite3 -cmd ".timeout 5000" "${DBLOCK_DSN#sqlite:}" "$1; SELECT changes();" 2>/dev/null ;;
    mysql) server_sql "$1; SELECT ROW_COUNT()" ;;
    # psql prints the command tag ("INSERT 0 1", "UPDATE 0"): its last word is the count.
    postgres) timeout 10 psql "$DBLOCK_DSN" -Xt -v ON_ERROR_STOP=1 -c "$1" | awk 'NF { n = $NF } END { print n }' ;;
  esac
}
java_lock() {  # NAME LOCKED_BY AT_MOST_MS: ShedLock's insert; prints 1 when it took the lock
  case "$DBLOCK_TEST_BACKEND" in
    sqlite) java_sql "INSERT INTO $T(name, lock_until, locked_at, locked_by) VALUES('$1', strftime('%Y-%m-%d %H:%M:%f', 'now', '+$(($3 / 1000)) seconds'), strftime('%Y-%m-%d %H:%M:%f', 'now'), '$2')" || echo 0 ;;
    mysql) java_sql "INSERT IGNORE INTO $T(name, lock_until, locked_at, locked_by) VALUES('$1', TIMESTAMPADD(MICROSECOND, $(($3 * 1000)), UTC_TIMESTAMP(3)), UTC_TIMESTAMP(3), '$2')" ;;
    postgres) java_sql "INSERT INTO $T(name, lock_until, locked_at, locked_by) VALUES('$1', timezone('utc', CURRENT_TIMESTAMP) + cast('$3 milliseconds' as interval), timezone('utc', CURRENT_TIMESTAMP), '$2') ON CONFLICT (name) DO UPDATE SET lock_until = timezone('utc', CURRENT_TIMESTAMP) + cast('$3 milliseconds' as interval), locked_at = timezone('utc', CURRENT_TIMESTAMP), locked_by = '$2' WHERE $T.name = '$1' AND $T.lock_until <= timezone('utc', CURRENT_TIMESTAMP)" ;;
  esac
}
java_update() {  # NAME LOCKED_BY AT_MOST_MS: ShedLock's update of an expired row
  case "$DBLOCK_TEST_BACKEND" in
    sqlite) java_sql "UPDATE $T SET lock_until = strftime('%Y-%m-%d %H:%M:%f', 'now', '+$(($3 / 1000)) seconds'), locked_at = strftime('%Y-%m-%d %H:%M:%f', 'now'), locked_by = '$2' WHERE name = '$1' AND lock_until <= strftime('%Y-%m-%d %H:%M:%f', 'now')" ;;
    mysql) java_sql "UPDATE $T SET lock_until = TIMESTAMPADD(MICROSECOND, $(($3 * 1000)), UTC_TIMESTAMP(3)), locked_at = UTC_TIMESTAMP(3), locked_by = '$2' WHERE name = '$1' AND lock_until <= UTC_TIMESTAMP(3)" ;;
    postgres) java_sql "UPDATE $T SET lock_until = timezone('utc', CURRENT_TIMESTAMP) + cast('$3 milliseconds' as interval), locked_at = timezone('utc', CURRENT_TIMESTAMP), locked_by = '$2' WHERE $T.name = '$1' AND $T.lock_until <= timezone('utc', CURRENT_TIMESTAMP)" ;;
  esac
}
java_unlock() {  # NAME LOCKED_BY AT_LEAST_MS: ShedLock's unlock
  case "$DBLOCK_TEST_BACKEND" in
    sqlite) java_sql "UPDATE $T SET lock_until = CASE WHEN strftime('%Y-%m-%d %H:%M:%f', locked_at, '+$(($3 / 1000)) seconds') > strftime('%Y-%m-%d %H:%M:%f', 'now') THEN strftime('%Y-%m-%d %H:%M:%f', locked_at, '+$(($3 / 1000)) seconds') ELSE strftime('%Y-%m-%d %H:%M:%f', 'now') END WHERE name = '$1' AND locked_by = '$2'" ;;
    mysql) java_sql "UPDATE $T SET lock_until = IF (TIMESTAMPADD(MICROSECOND, $(($3 * 1000)), locked_at) > UTC_TIMESTAMP(3) , TIMESTAMPADD(MICROSECOND, $(($3 * 1000)), locked_at), UTC_TIMESTAMP(3)) WHERE name = '$1' AND locked_by = '$2'" ;;
    postgres) java_sql "UPDATE $T SET lock_until = CASE WHEN locked_at + cast('$3 milliseconds' as interval) > timezone('utc', CURRENT_TIMESTAMP) THEN locked_at + cast('$3 milliseconds' as interval) ELSE timezone('utc', CURRENT_TIMESTAMP) END WHERE name = '$1' AND locked_by = '$2'" ;;
  esac
}
java_takes() { [ "$(java_update "$@")" = 1 ]; }
shed_free() {
  local s=0
  shed status -q "$1" >/dev/null 2>&1 || s=$?
  [ "$s" -eq 1 ]
}
dblock_takes() { shed run "$1" -- true 2>/dev/null; }

# The table: made on first use with ShedLock's DDL; the Java side needs it before that.
assert_status "init --table-format shedlock creates the ShedLock table" 0 shed init
check "schema prints ShedLock's DDL too" sh -c "dblock --table-format shedlock --table '$T' schema | grep -q 'lock_until'"
assert_status "run makes a missing ShedLock table on demand" 0 dblock --table-format shedlock --table "${T}2" run "$(key ondemand)" -- true
assert_eq "the new table holds the run's row" 1 "$(java_sql "SELECT count(*) FROM ${T}2 WHERE locked_by <> ''" | head -1)"
# A table of that name without ShedLock's columns is a config error naming the column.
case "$DBLOCK_TEST_BACKEND" in
  sqlite) sqlite3 "${DBLOCK_DSN#sqlite:}" "CREATE TABLE ${T}3 (name VARCHAR(64) PRIMARY KEY, lock_until TIMESTAMP(3))" ;;
  *) server_sql "CREATE TABLE ${T}3 (name VARCHAR(64) PRIMARY KEY, lock_until TIMESTAMP(3))" ;;
esac
assert_status "a ShedLock table of the wrong shape exits 78" 78 dblock --table-format shedlock --table "${T}3" run "$(key shape)" -- true
check "the message names the missing column" sh -c "dblock --table-format shedlock --table '${T}3' run x -- true 2>&1 | grep -q 'column locked_at is missing'"
# The config file key.
printf 'table-format = "shedlock"\ntable = "%s"\n' "$T" >"$E2E_TMP/shed.conf"
k=$(key config)
java_lock "$k" java-host-8 30000 >/dev/null
assert_status "table-format from the config file: the Java holder makes dblock skip" 75 dblock --config "$E2E_TMP/shed.conf" run "$k" -- true
long=$(printf 'k%.0s' $(seq 65))
assert_status "a key longer than ShedLock's 64 characters is refused with 64" 64 shed run "$long" -- true
assert_status "a 64-character key is fine" 0 shed run "${long:1}" -- true
assert_status "--min-interval is refused (ShedLock keeps no last start)" 64 shed run "$(key interval)" --min-interval 1m -- true

# Ten dblock hosts racing for one name: each runs once, in turn, tokens 1..10.
k=$(key race)
for i in 1 2 3 4 5 6 7 8 9 10; do start_bg "r$i" dblock --table-format shedlock --table "$T" run "$k" -w 60 -- sleep 0.1; done
raced=0
for i in 1 2 3 4 5 6 7 8 9 10; do pid_var="r$i"; wait_exit rc "${!pid_var}" 90; [ "$rc" = 0 ] && raced=$((raced + 1)); done
assert_eq "all ten racing runs succeeded" 10 "$raced"
assert_eq "ten history rows with tokens 1..10" "10 $(seq -s ' ' 10)" "$(shed history "$k" --json | python3 -c 'import json, sys; r = json.load(sys.stdin)["runs"]; print(len(r), *sorted(x["token"] for x in r))')"

# Java holds -> dblock skips, and status names the Java holder.
k=$(key javaholds)
assert_eq "Java takes the lock (insert)" 1 "$(java_lock "$k" java-host-1 30000)"
assert_status "dblock run skips with 75 while Java holds it" 75 shed run "$k" -- true
assert_eq "status shows the Java holder" "held java-host-1 shedlock" "$(shed status "$k" --json | json_field locks.0.state locks.0.owner locks.0.strategy)"
check "status says the token is dblock's only" sh -c "dblock --table-format shedlock --table '$T' status '$k' 2>&1 | grep -qi 'fencing token'"
assert_eq "Java unlocks (lockAtLeastFor 0)" 1 "$(java_unlock "$k" java-host-1 0)"
check "dblock runs once Java unlocked" dblock_takes "$k"

# dblock holds -> Java's insert and update take nothing; the heartbeat extends lock_until
# (ShedLock's extend) while the command runs longer than --ttl. The longest part (two TTLs, then
# a crash and the TTL again): it runs beside the parts below, on a key of its own.
dblock_holds() {
  local k holder
  T="${DBLOCK_TABLE_PREFIX}shedlock"  # the part's own tables (in_parallel), made by its first run
  k=$(key dblockholds)
  start_bg holder dblock --table-format shedlock --table "$T" run "$k" --ttl 4s --kill-after 0.2s -- sleep 60
  check "dblock holds it" wait_for 10 sh -c "dblock --table-format shedlock --table '$T' status -q '$k'"
  assert_eq "Java's insert does not take it" 0 "$(java_lock "$k" java-host-4 30000)"
  assert_eq "Java's update changes 0 rows" 0 "$(java_update "$k" java-host-4 30000)"
  sleep 9
  assert_eq "after twice the TTL the heartbeat still holds it (Java's update: 0 rows)" 0 "$(java_update "$k" java-host-4 30000)"
  assert_eq "status shows dblock's owner with host and pid" "held $(hostname)" "$(shed status "$k" --json | json_field locks.0.state locks.0.host)"
  # A crashed dblock (kill -9, command too) frees at lock_until.
  kill -KILL "$holder"
  wait "$holder" 2>/dev/null
  assert_eq "right after the crash Java still cannot take it" 0 "$(java_update "$k" java-host-4 30000)"
  check "Java takes it once the crashed dblock's lock_until has passed" wait_for 10 java_takes "$k" java-host-4 30000
  assert_status "and then dblock skips" 75 shed run "$k" -- true
}
in_parallel dblockholds dblock_holds

# Java's lockAtLeastFor is honoured by dblock.
k=$(key javaleast)
java_lock "$k" java-host-2 30000 >/dev/null
java_unlock "$k" java-host-2 3000 >/dev/null
assert_status "dblock skips during Java's lockAtLeastFor" 75 shed run "$k" -- true
check "dblock runs once lockAtLeastFor has passed" wait_for 10 dblock_takes "$k"

# A crashed Java holder (never unlocked) frees at lock_until.
k=$(key javacrash)
java_lock "$k" java-host-3 2000 >/dev/null
assert_status "dblock skips while the crashed Java's lock_until is ahead" 75 shed run "$k" -- true
check "dblock runs once its lock_until has passed" wait_for 10 dblock_takes "$k"

# dblock's --min-hold is ShedLock's lockAtLeastFor, honoured by Java.
k=$(key dblockleast)
assert_status "dblock runs a short job with --min-hold 3s" 0 shed run "$k" --min-hold 3s -- true
assert_eq "Java cannot take it during --min-hold" 0 "$(java_update "$k" java-host-5 30000)"
check "Java takes it once --min-hold has passed" wait_for 10 java_takes "$k" java-host-5 30000
# Without --min-hold a release frees it for Java at once.
k=$(key dblockdone)
assert_status "dblock runs and releases" 0 shed run "$k" -- true
assert_eq "Java takes it right after" 1 "$(java_update "$k" java-host-6 30000)"

# acquire / renew / release for shell scripts, on the same row.
k=$(key script)
tok=$(shed acquire "$k" --owner script-1 --ttl 3s)
check "acquire prints a token" test "${tok:-0}" -gt 0
assert_eq "Java cannot take what acquire holds" 0 "$(java_update "$k" java-host-7 30000)"
assert_status "renew by token (ShedLock's extend)" 0 shed renew "$k" --token "$tok" --ttl 60s
assert_status "renew by someone else is refused with 76" 76 shed renew "$k" --owner script-2
sleep 4
assert_eq "the renewed lock outlives the first TTL" 0 "$(java_update "$k" java-host-7 30000)"
assert_status "release by owner (ShedLock's unlock)" 0 shed release "$k" --owner script-1
assert_eq "Java takes it right after the release" 1 "$(java_update "$k" java-host-7 30000)"
assert_status "release --force frees Java's lock too" 0 shed release "$k" --force
check "and dblock takes it then" dblock_takes "$k"

# Tokens still increase (dblock's own row of the name), and history is in dblock's runs table.
k=$(key tokens)
t1=$(shed run "$k" -- sh -c 'echo $DBLOCK_TOKEN')
t2=$(shed run "$k" -- sh -c 'echo $DBLOCK_TOKEN')
check "DBLOCK_TOKEN increases ($t1 < $t2)" test "${t1:-0}" -gt 0 -a "${t2:-0}" -gt "${t1:-0}"
assert_eq "both runs are in the history" "2 ok" "$(shed history "$k" --json | json_field runs.# runs.0.outcome)"
join_parallel
finish

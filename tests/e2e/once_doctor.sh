#!/usr/bin/env bash
# doctor (SQLite): one line per check; exit 0 on a good set-up, 78 with a clear FAIL line when the
# database cannot be written.
source "$(dirname "$0")/lib.sh"

assert_status "init" 0 dblock init
out=$(dblock doctor 2>&1)
assert_eq "doctor passes on a good set-up" 0 $?
echo "$out" | sed 's/^/    | /'
check "every line is one check that passed" bash -c '! grep -qv "^ok    [a-z_]*: ." <<<"$1"' _ "$out"
for name in connect clock tables privileges; do
  check "doctor checks $name" grep -q "^ok    $name: " <<<"$out"
done
# SQLite has no server clock: leases follow CLOCK_BOOTTIME on the host (README, dblock(1) "SQLite
# time"), so doctor must not claim database time.
check "the clock line does not claim database time" bash -c '! grep -q "^ok    clock: .*database time" <<<"$1"' _ "$out"
check "the clock line says leases follow CLOCK_BOOTTIME on this host" \
  grep -q "^ok    clock: .*no server clock.*CLOCK_BOOTTIME on this host" <<<"$out"
check "doctor names SQLite's version, built in" grep -Eq "^ok    client: SQLite 3\.[0-9.]+ \(built in\)" <<<"$out"

out=$(dblock doctor --strategy advisory 2>&1)
assert_eq "a strategy SQLite cannot do fails doctor with 78" 78 $?
check "and says which strategies it can do" grep -q "^FAIL  strategy: .*lease" <<<"$out"

# A read-only database: a root-owned 0644 file in a root-owned 0755 directory, used by nobody
# (root itself may write anything, so the check would not see it). Without root: chmod a-w.
ro_dir="$E2E_TMP/ro"
mkdir -p "$ro_dir"
ro_db="$ro_dir/dblock.db"
assert_status "init the read-only database (while still writable)" 0 dblock --dsn "sqlite:$ro_db" init
run_ro() { "$@"; }
if [ "$(id -u)" -eq 0 ]; then
  command -v runuser >/dev/null || skip_or_fail "runuser is needed to drop root"
  chown -R root:root "$ro_dir"
  chmod 0644 "$ro_dir"/*
  chmod 0755 "$ro_dir"
  chmod 0711 "$E2E_TMP"  # nobody may pass through, not list or write
  dblock_bin=$(readlink -f "$DBLOCK_BIN")
  run_ro() { runuser -u nobody -- env XDG_CONFIG_HOME=/nonexistent XDG_STATE_HOME=/nonexistent "$dblock_bin" "${@:2}"; }
  check "nobody can read the database" runuser -u nobody -- test -r "$ro_db"
  check "nobody cannot write it" runuser -u nobody -- test ! -w "$ro_db"
else
  chmod 0444 "$ro_dir"/*
  chmod 0555 "$ro_dir"
fi
out=$(run_ro dblock --dsn "sqlite:$ro_db" doctor 2>&1)
status=$?
echo "$out" | sed 's/^/    | /'
assert_eq "doctor fails on a read-only SQLite file with 78" 78 "$status"
check "a FAIL line says what is wrong" grep -Eq "^FAIL  [a-z_]+: .*(not writable|read-only|readonly|for writing)" <<<"$out"
check "the FAIL line names the file or its directory" grep -q "^FAIL  .*$ro_dir" <<<"$out"
# And run itself reports it as a database error rather than running the command unlocked.
run_ro dblock --dsn "sqlite:$ro_db" run "$(key ro)" -- true 2>/dev/null
status=$?
check "run on the read-only database does not succeed (exit $status)" test "$status" -ne 0
chmod -R u+w "$ro_dir"

finish

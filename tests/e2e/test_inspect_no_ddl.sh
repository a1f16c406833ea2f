#!/usr/bin/env bash
# Inspection creates nothing, on every backend: status, history and doctor on a database
# without dblock's tables exit 69 "no lock database at DSN ..." and leave no table (servers:
# no DDL) and no file (SQLite) behind, and doctor's checks say the tables do not exist yet
# rather than pass on an error; after `dblock init` the same commands work.
# cells: sqlite:lease|mysql:lease|postgres:lease
source "$(dirname "$0")/lib.sh"

hint='(nothing has run here yet, or the DSN is wrong; `dblock init` creates it)'
redacted_dsn=$DBLOCK_DSN
if [ "$DBLOCK_TEST_BACKEND" = sqlite ]; then
  # The path, not the DSN: SQLite's sentence names the file.
  redacted_dsn=${DBLOCK_DSN#sqlite:}
else
  redacted_dsn=$(sed -E 's#(://[^:/@]*):[^@]*@#\1:****@#' <<<"$DBLOCK_DSN")
fi

# How many tables of this script's prefix exist (SQLite: whether the file exists at all).
dblock_tables() {
  local n=${#DBLOCK_TABLE_PREFIX}
  case "$DBLOCK_TEST_BACKEND" in
    sqlite) if [ -e "${DBLOCK_DSN#sqlite:}" ]; then echo file; else echo 0; fi ;;
    mysql) server_sql "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()
                       AND LEFT(TABLE_NAME, $n) = '$DBLOCK_TABLE_PREFIX'" ;;
    postgres) server_sql "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()
                          AND left(table_name, $n) = '$DBLOCK_TABLE_PREFIX'" ;;
  esac
}

assert_eq "no tables of this prefix to begin with" 0 "$(dblock_tables)"
for cmd in "status" "status $(key a)" "-q status $(key a)" "history" "history $(key a)"; do
  out=$(dblock $cmd 2>&1)
  assert_eq "$cmd without the tables exits 69" 69 $?
  assert_eq "$cmd says there is no lock database" "dblock: no lock database at $redacted_dsn $hint" "$out"
done
out=$(dblock doctor 2>&1)
assert_eq "doctor without the tables exits 69" 69 $?
echo "$out" | sed 's/^/    | /'
check "doctor says there is no lock database" grep -qF "no lock database at $redacted_dsn $hint" <<<"$out"
# Before init no check passes on an error (the failover record's read meets the missing tables):
# each says the tables do not exist yet, as the privileges check does.
check "no ok line carries an error" bash -c '! grep -Eq "^ok .*(could not|does not exist|doesn.t exist|SQLSTATE|errno)" <<<"$1"' _ "$out"
if [ "$DBLOCK_TEST_BACKEND" != sqlite ]; then
  check "doctor's failover line says the tables do not exist yet" \
    grep -q "^ok    failover: the dblock tables do not exist yet" <<<"$out"
  check "a server's clock line says leases use database time" \
    grep -q "^ok    clock: database clock is .*(dblock uses database time for leases)" <<<"$out"
fi
assert_eq "status, history and doctor created no table" 0 "$(dblock_tables)"

assert_status "init creates the tables" 0 dblock -q init
assert_status "status then answers free (1)" 1 dblock -q status "$(key a)"
assert_status "history then works" 0 dblock history "$(key a)"

finish

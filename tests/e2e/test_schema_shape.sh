#!/usr/bin/env bash
# cells: (sqlite|mysql|postgres):lease|mysql:advisory
# Tables a DBA made from `dblock schema` output, edited: a lock table whose primary key is
# (name, owner) gave every holder a row of its own, each with token 1 (MariaDB), and a token or
# name of a narrower type truncates or merges. dblock refuses such a table with 78, naming it,
# what is wrong and the fix: `init` and `doctor` by the shape check, `run` when a statement
# meets the wrong key (SQLite and PostgreSQL at once; MySQL when a second row of the name
# appears). The check runs only on `init`, doctor and the schema-missing path, never in a run
# on a sound table (docs/backend-contract.md "Schema on demand").
source "$(dirname "$0")/lib.sh"

backend=$DBLOCK_TEST_BACKEND
db_sql() {
  case $backend in
    sqlite) timeout 10 sqlite3 -cmd ".timeout 5000" "${DBLOCK_DSN#sqlite:}" "$1" ;;
    *) server_sql "$1" ;;
  esac
}

# made PREFIX SED-ARGS...: the tables of `dblock schema` for PREFIX, comments dropped, edited
# by sed, created by the database's own client.
made() {
  local prefix=$1
  shift
  DBLOCK_TABLE_PREFIX=$prefix dblock schema --dialect "$backend" | sed -e 's/ *--.*$//' "$@" >"$E2E_TMP/ddl.sql"
  db_sql "$(cat "$E2E_TMP/ddl.sql")" >/dev/null
}

# refused NAME TEXT COMMAND...: exit 78 and TEXT in what the command printed.
refused() {
  local name=$1 text=$2 st=0
  shift 2
  "$@" >"$E2E_TMP/out" 2>"$E2E_TMP/err" || st=$?
  assert_eq "$name: exit status" 78 "$st"
  if grep -qF -- "$text" "$E2E_TMP/out" "$E2E_TMP/err"; then pass "$name: message"; else
    fail "$name: no '$text' in: $(cat "$E2E_TMP/out" "$E2E_TMP/err")"
  fi
}

# The composite key: name's own PRIMARY KEY dropped, (name, owner) after the last column.
P=${DBLOCK_TABLE_PREFIX}pk_
made "$P" -e 's/NOT NULL PRIMARY KEY/NOT NULL/' -e 's/ PRIMARY KEY CHECK/ NOT NULL CHECK/' \
  -e 's/^\(  slots .*[^,]\)$/\1, PRIMARY KEY (name, owner)/'
export DBLOCK_TABLE_PREFIX=$P
why="table ${P}locks in"
key="has no primary key or unique index on exactly (name) (its unique keys: (name, owner))"
fix="CREATE UNIQUE INDEX ${P}locks_key ON ${P}locks (name)"
refused "init on a (name, owner) key" "$key" dblock init
grep -qF "$why" "$E2E_TMP/err" && grep -qF "$fix" "$E2E_TMP/err" && pass "init names the table and the fix" ||
  fail "init names the table and the fix: $(cat "$E2E_TMP/err")"
refused "doctor on a (name, owner) key" "$key" dblock doctor

# Two runs of one key: never both, never both with token 1. SQLite and PostgreSQL refuse the
# first already (ON CONFLICT (name) finds no such key), and so does MariaDB (the failover
# record's read asks the catalog for the key, as its take reads no row back); MySQL's ON
# DUPLICATE KEY UPDATE finds (name, owner), so its first run holds alone and the second finds
# the name's second row.
k=$(key composite)
tokens=$E2E_TMP/tokens
start_bg first dblock run "$k" -- sh -c "echo \$DBLOCK_TOKEN >>'$tokens'; sleep 3" 2>"$E2E_TMP/first.err"
sleep 1
refused "a second run of the key" "$key" dblock run "$k" -- sh -c "echo \$DBLOCK_TOKEN >>'$tokens'"
wait_exit first_st "$first"
if [ "$backend" = mysql ] && ! db_sql "SELECT VERSION()" | grep -q MariaDB; then
  assert_eq "the first run held alone (exit status)" 0 "$first_st"
else
  assert_eq "the first run was refused too (exit status)" 78 "$first_st"
fi
ran=$(cat "$tokens" 2>/dev/null | wc -l)
assert_between "at most one of the two ran" 0 1 "$ran"
refused "a later run of the key" "$key" dblock run "$k" -- true

# The fix the message gives: a unique index on (name) next to the composite key is enough.
db_sql "DELETE FROM ${P}locks" >/dev/null
db_sql "$fix" >/dev/null
assert_status "init after the fix" 0 dblock init
assert_status "a run after the fix" 0 dblock run "$k" -- true
assert_status "another run after the fix" 0 dblock run "$k" -- true
assert_eq "tokens increase after the fix" 2 "$(dblock status --json "$k" | json_field locks.0.token)"

# The key dropped once the tables are in use: the failover record names this server by then, so
# MariaDB's take that does not wait reads the record itself (the lease's take, advisory's
# numbered take) and checks the key there (the lease's finds the gate closed without it, and
# core's own read of the record fails): refused (78) with nothing written for the key.
if [ "$backend" = mysql ] && db_sql "SELECT VERSION()" | grep -q MariaDB; then
  P=${DBLOCK_TABLE_PREFIX%pk_}key_
  made "$P"
  DBLOCK_TABLE_PREFIX=$P assert_status "a run while the key is there" 0 dblock run "$(key keyed)" -- true
  db_sql "ALTER TABLE ${P}locks DROP PRIMARY KEY, ADD UNIQUE KEY ${P}locks_owner (name, owner)" >/dev/null
  k=$(key unkeyed)
  DBLOCK_TABLE_PREFIX=$P refused "a run once the key is gone" "$key" dblock run "$k" -- true
  assert_eq "nothing written for the key once it is gone" 0 "$(db_sql "SELECT COUNT(*) FROM ${P}locks WHERE name = '$k'")"
fi

# A token narrower than 64 bits (SQLite: REAL affinity, a float).
P=${DBLOCK_TABLE_PREFIX%pk_}tok_
case $backend in
  sqlite) made "$P" -e 's/^\(  token *\)INTEGER NOT NULL DEFAULT 0/\1REAL NOT NULL DEFAULT 0/' ;;
  mysql) made "$P" -e 's/^  token BIGINT NOT NULL DEFAULT 0/  token INT NOT NULL DEFAULT 0/' ;;
  postgres) made "$P" -e 's/^  token bigint NOT NULL DEFAULT 0/  token integer NOT NULL DEFAULT 0/' ;;
esac
DBLOCK_TABLE_PREFIX=$P refused "init with a narrow token" "${P}locks in" dblock init
grep -qF "column token has the type" "$E2E_TMP/err" && pass "the message names the token's type" ||
  fail "the message names the token's type: $(cat "$E2E_TMP/err")"

# A name that cannot hold every key (SQLite: NUMERIC affinity, '007' = '7'; servers: 64 chars).
P=${DBLOCK_TABLE_PREFIX%pk_}nam_
case $backend in
  sqlite) made "$P" -e 's/^\(  name *\)TEXT *NOT NULL PRIMARY KEY/\1NUMERIC NOT NULL PRIMARY KEY/' ;;
  mysql) made "$P" -e 's/^  name VARBINARY(255) NOT NULL PRIMARY KEY/  name VARCHAR(64) NOT NULL PRIMARY KEY/' ;;
  postgres) made "$P" -e 's/^  name text COLLATE "C" \(NOT NULL \)\{0,1\}PRIMARY KEY/  name varchar(64) COLLATE "C" PRIMARY KEY/' ;;
esac
DBLOCK_TABLE_PREFIX=$P refused "init with a narrow name" "${P}locks in" dblock init
grep -qF "column name has the type" "$E2E_TMP/err" && pass "the message names the name's type" ||
  fail "the message names the name's type: $(cat "$E2E_TMP/err")"

# The claims table of for-update and txn-insert (servers): its key is (name, kind). Without it,
# two txn-insert runs on MySQL both inserted the key's row and held it at once.
if [ "$backend" != sqlite ]; then
  P=${DBLOCK_TABLE_PREFIX%pk_}cl_
  made "$P" -e "s/^  PRIMARY KEY (name, kind)\$/  CHECK (kind <> '')/"
  claims="${P}claims in"
  DBLOCK_TABLE_PREFIX=$P refused "init with claims keyed on nothing" "$claims" dblock --strategy txn-insert init
  grep -qF "has no primary key or unique index on exactly (name, kind)" "$E2E_TMP/err" &&
    pass "the message names the claims key" || fail "the message names the claims key: $(cat "$E2E_TMP/err")"
  if [ "$backend" = mysql ]; then
    DBLOCK_TABLE_PREFIX=$P refused "a txn-insert run on claims keyed on nothing" "$claims" \
      dblock --strategy txn-insert run "$(key claims)" -- true
  fi
fi

# dblock's own tables pass.
DBLOCK_TABLE_PREFIX=${DBLOCK_TABLE_PREFIX%pk_}own_ assert_status "init of dblock's own tables" 0 dblock init
finish

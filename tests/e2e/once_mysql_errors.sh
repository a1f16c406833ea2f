#!/usr/bin/env bash
# MySQL connect errors: wrong password -> 78, unknown database -> 78, closed port -> 69, each
# with a message on stderr that never shows the password (neither the wrong one nor the real one).
source "$(dirname "$0")/lib.sh"

# mysql://user[:pass]@host[:port]/db[?params] -> pieces, so one can be swapped at a time.
rest=${DBLOCK_DSN#*://}
userinfo=${rest%%@*}
user=${userinfo%%:*}
real_pw=
[[ $userinfo == *:* ]] && real_pw=${userinfo#*:}
hostpart=${rest#*@}
hostport=${hostpart%%/*}
db_and_params=${hostpart#*/}
secret='Zq9-not-the-password-77'

# expect_error NAME CODE DSN
expect_error() {
  local name=$1 want=$2 dsn=$3 got=0
  timeout 20 dblock -d "$dsn" status >"$E2E_TMP/out" 2>"$E2E_TMP/err" || got=$?
  assert_eq "$name: exit status ($(head -c 200 "$E2E_TMP/err"))" "$want" "$got"
  check "$name: a message on stderr" test -s "$E2E_TMP/err"
  check "$name: the given password is not shown" bash -c "! grep -qF -- '$secret' '$E2E_TMP/out' '$E2E_TMP/err'"
  if [ -n "$real_pw" ]; then
    check "$name: the real password is not shown" bash -c "! grep -qF -- '$real_pw' '$E2E_TMP/out' '$E2E_TMP/err'"
  fi
}

expect_error "wrong password" 78 "mysql://$user:$secret@$hostport/$db_and_params"
expect_error "unknown database" 78 "mysql://$userinfo@$hostport/dblock_no_such_db_e2e"
check "unknown database: the database is named" grep -q dblock_no_such_db_e2e "$E2E_TMP/err"
expect_error "closed port" 69 "mysql://$user:$secret@127.0.0.1:1/$db_and_params"
# The mariadb:// spelling reaches the same server.
# (status only looks: init makes the tables this fresh prefix lacks.)
mariadb_ok() { timeout 20 dblock -d "mariadb://$rest" -q init && timeout 20 dblock -d "mariadb://$rest" status >/dev/null; }
check "mariadb:// reaches the same server as mysql://" mariadb_ok

finish

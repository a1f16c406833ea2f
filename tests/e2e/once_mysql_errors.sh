#!/usr/bin/env bash
# MySQL connect errors: wrong password -> 78, unknown database -> 78, closed port -> 69, and
# no message ever shows the password. Needs DBLOCK_TEST_MYSQL_DSN (scripts/test-servers.sh).
set -u
DBLOCK_BIN=${DBLOCK_BIN:?DBLOCK_BIN is not set}
dsn=${DBLOCK_TEST_MYSQL_DSN:-}
if [[ -z $dsn ]]; then
  echo "DBLOCK_TEST_MYSQL_DSN is not set: skipped" >&2
  [[ ${CI:-} == true ]] && exit 1
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# mysql://user[:pass]@host[:port]/db[?params] -> pieces, so we can swap one at a time.
rest=${dsn#*://}
userinfo=${rest%%@*}
user=${userinfo%%:*}
hostpart=${rest#*@}
hostport=${hostpart%%/*}
host=${hostport%%:*}
db_and_params=${hostpart#*/}
secret='Zq9-not-the-password-77'

expect() {  # expect CODE DESCRIPTION DSN
  local want=$1 what=$2 d=$3 got
  timeout 20 "$DBLOCK_BIN" -d "$d" status >"$tmp/out" 2>"$tmp/err"
  got=$?
  [[ $got == "$want" ]] || fail "$what: exit $got, expected $want ($(cat "$tmp/err"))"
  grep -q -- "$secret" "$tmp/out" "$tmp/err" && fail "$what: the password appears in the output"
  [[ $userinfo == *:* ]] && grep -qF -- ":${userinfo#*:}@" "$tmp/err" && fail "$what: the real password appears"
  [[ -s $tmp/err ]] || fail "$what: no message on stderr"
}

expect 78 "wrong password" "mysql://$user:$secret@$hostport/$db_and_params"
expect 78 "unknown database" "mysql://$userinfo@$hostport/dblock_no_such_db_e2e"
expect 69 "closed port" "mysql://$user:$secret@127.0.0.1:1/$db_and_params"
[[ $host == 127.0.0.1 || $host == localhost ]] || echo "note: server is not on loopback" >&2

exit $((failures > 0))

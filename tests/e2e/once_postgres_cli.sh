#!/usr/bin/env bash
# The real binary against PostgreSQL: acquire/status/release/renew exit codes and tokens,
# wrong password / unreachable port / unknown database exit codes with no password in any
# output, doctor, schema. Needs DBLOCK_TEST_POSTGRES_DSN (scripts/test-servers.sh); without
# it: skipped (77), or a failure when CI=true.
#   DBLOCK_BIN        the binary (default: build/dblock)
set -uo pipefail

source_dir=${DBLOCK_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bin=${DBLOCK_BIN:-$source_dir/build/dblock}
dsn=${DBLOCK_TEST_POSTGRES_DSN:-}
if [ -z "$dsn" ]; then
  echo "DBLOCK_TEST_POSTGRES_DSN is not set"
  if [ "${CI:-}" = true ]; then exit 1; else exit 77; fi
fi

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "ok    $1"; }
fail() { failed=$((failed + 1)); echo "FAIL  $1"; }
check() { # check NAME EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then pass "$1"; else fail "$1 (expected '$2', got '$3')"; fi
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix="e2e_$(date +%s)_$$_"
export DBLOCK_DSN="$dsn"
export DBLOCK_TABLE_PREFIX="$prefix"
db() { timeout 30 "$bin" "$@"; }

out=$(db acquire job --owner alice --ttl 30s); rc=$?
check "first acquire exits 0" 0 "$rc"
check "first acquire prints token 1" 1 "$out"
db acquire job --owner bob >/dev/null 2>&1; check "second holder gets the conflict code" 75 "$?"
db acquire job --owner bob -E 9 >/dev/null 2>&1; check "-E changes the conflict code" 9 "$?"
db status job -q; check "status -q of a held key" 0 "$?"
db status --json job | grep -q '"held"' && pass "status --json says held" || fail "status --json says held"
db renew job --owner alice >/dev/null; check "renew by the holder" 0 "$?"
db renew job --owner bob >/dev/null 2>&1; rc=$?
[ "$rc" -ne 0 ] && pass "renew by someone else fails ($rc)" || fail "renew by someone else succeeded"
db release job --owner bob >/dev/null 2>&1; rc=$?
[ "$rc" -ne 0 ] && pass "release by someone else fails ($rc)" || fail "release by someone else succeeded"
db release job --owner alice; check "release by the holder" 0 "$?"
db status job -q; check "status -q of a released key" 1 "$?"
out=$(db acquire job --owner bob); check "token grows after release" 2 "$out"
db release job --token 2; check "release by token" 0 "$?"

# A 255-byte UTF-8 key round-trips through the CLI.
key=$(printf 'k%.0s' $(seq 1 63); printf '\xf0\x9f\x94\x92%.0s' $(seq 1 48))
check "key is 255 bytes" 255 "$(printf %s "$key" | wc -c)"
out=$(db acquire "$key" --owner alice); check "long UTF-8 key acquires" 1 "$out"
db status "$key" -q; check "long UTF-8 key is held" 0 "$?"
db release "$key" --owner alice; check "long UTF-8 key releases" 0 "$?"

# Connection errors: right exit code, never the password.
secret=Sup3rSecretPw
base=$(printf %s "$dsn" | sed -E 's#^(postgres(ql)?://[^:@/]+)(:[^@]*)?@#\1:'"$secret"'@#')
DBLOCK_DSN="$base" db status >"$tmp/out" 2>&1; rc=$?
case $rc in 69|78) pass "wrong password exits $rc" ;; *) fail "wrong password exits $rc" ;; esac
grep -q "$secret" "$tmp/out" && fail "wrong password: the password was printed" || pass "wrong password: no password printed"
unreach=$(printf %s "$base" | sed -E 's#@([^/:]+)(:[0-9]+)?/#@\1:1/#')
DBLOCK_DSN="$unreach" db status >"$tmp/out" 2>&1; check "unreachable port exits 69" 69 "$?"
grep -q "$secret" "$tmp/out" && fail "unreachable: the password was printed" || pass "unreachable: no password printed"
nodb=$(printf %s "$dsn" | sed -E 's#^([^/]*//[^/]*)/[^?]*#\1/no_such_db_dblock#')
DBLOCK_DSN="$nodb" db status >"$tmp/out" 2>&1; check "unknown database exits 78" 78 "$?"
grep -q "no_such_db_dblock" "$tmp/out" && pass "unknown database is named" || fail "unknown database is named"

db doctor >"$tmp/out" 2>&1; check "doctor exits 0" 0 "$?"
for name in server idle_timeouts pgbouncer privileges; do
  grep -q "$name" "$tmp/out" && pass "doctor checks $name" || fail "doctor checks $name"
done
db schema --dialect postgres | grep -q "CREATE TABLE IF NOT EXISTS \"${prefix}locks\"" &&
  pass "schema prints the prefixed DDL" || fail "schema prints the prefixed DDL"

if [ "$failed" -eq 0 ]; then
  echo "$passed passed"
  exit 0
fi
echo "$passed passed, $failed failed"
exit 1

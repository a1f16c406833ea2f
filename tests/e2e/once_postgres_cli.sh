#!/usr/bin/env bash
# The real binary against PostgreSQL: acquire/status/release/renew exit codes and tokens, a
# 255-byte UTF-8 key, wrong password / unreachable port / unknown database exit codes with no
# password in any output, doctor, schema.
source "$(dirname "$0")/lib.sh"

db() { timeout 30 dblock "$@"; }
k=$(key job)

out=$(db acquire "$k" --owner alice --ttl 30s); rc=$?
assert_eq "first acquire exits 0" 0 "$rc"
assert_eq "first acquire prints token 1" 1 "$out"
assert_status "second holder gets the conflict code" 75 db acquire "$k" --owner bob
assert_status "-E changes the conflict code" 9 db acquire "$k" --owner bob -E 9
assert_status "status -q of a held key" 0 db status -q "$k"
check "status --json says held" bash -c "timeout 30 dblock status --json '$k' | grep -q '\"held\"'"
assert_status "renew by the holder" 0 db renew "$k" --owner alice
check "renew by someone else fails" bash -c "! timeout 30 dblock renew '$k' --owner bob 2>/dev/null"
check "release by someone else fails" bash -c "! timeout 30 dblock release '$k' --owner bob 2>/dev/null"
assert_status "release by the holder" 0 db release "$k" --owner alice
assert_status "status -q of a released key" 1 db status -q "$k"
assert_eq "token grows after release" 2 "$(db acquire "$k" --owner bob)"
assert_status "release by token" 0 db release "$k" --token 2

# A 255-byte UTF-8 key round-trips through the CLI.
long=$(printf 'k%.0s' $(seq 1 63); printf '\xf0\x9f\x94\x92%.0s' $(seq 1 48))
assert_eq "key is 255 bytes" 255 "$(printf %s "$long" | wc -c)"
assert_eq "long UTF-8 key acquires" 1 "$(db acquire "$long" --owner alice)"
assert_status "long UTF-8 key is held" 0 db status -q "$long"
assert_status "long UTF-8 key releases" 0 db release "$long" --owner alice

# Connection errors: the right exit code, a message, never the password (given or real).
secret=Sup3rSecretPw
real_pw=$(printf %s "$DBLOCK_DSN" | sed -nE 's#^postgres(ql)?://[^:@/]+:([^@]*)@.*#\2#p')
# expect_error NAME CODES DSN: CODES is a regex of acceptable exit statuses.
expect_error() {
  local name=$1 codes=$2 dsn=$3 rc=0
  DBLOCK_DSN="$dsn" timeout 30 dblock status >"$E2E_TMP/out" 2>&1 || rc=$?
  if [[ $rc =~ ^($codes)$ ]]; then pass "$name exits $rc"; else fail "$name exits $rc, expected $codes: $(head -c 300 "$E2E_TMP/out")"; fi
  check "$name: a message" test -s "$E2E_TMP/out"
  check "$name: the given password is not printed" bash -c "! grep -qF -- '$secret' '$E2E_TMP/out'"
  if [ -n "$real_pw" ]; then
    check "$name: the real password is not printed" bash -c "! grep -qF -- '$real_pw' '$E2E_TMP/out'"
  fi
}
wrong_pw=$(printf %s "$DBLOCK_DSN" | sed -E 's#^(postgres(ql)?://[^:@/]+)(:[^@]*)?@#\1:'"$secret"'@#')
expect_error "wrong password" '69|78' "$wrong_pw"
unreach=$(printf %s "$wrong_pw" | sed -E 's#@([^/:]+)(:[0-9]+)?/#@\1:1/#')
expect_error "unreachable port" 69 "$unreach"
nodb=$(printf %s "$DBLOCK_DSN" | sed -E 's#^([^/]*//[^/]*)/[^?]*#\1/no_such_db_dblock#')
expect_error "unknown database" 78 "$nodb"
check "unknown database is named" grep -q no_such_db_dblock "$E2E_TMP/out"

db doctor >"$E2E_TMP/doctor" 2>&1
assert_eq "doctor exits 0" 0 "$?"
for name in server idle_timeouts pooler privileges; do
  check "doctor checks $name" grep -q "$name" "$E2E_TMP/doctor"
done
check "doctor names the libpq its module loaded, and where the module is" \
  grep -Eq "^ok    client: libpq [0-9]+\.[0-9]+ \(module .*dblock-postgres\.so\)" "$E2E_TMP/doctor"
check "schema prints the prefixed DDL" \
  bash -c "timeout 30 dblock schema --dialect postgres | grep -q 'CREATE TABLE IF NOT EXISTS \"${DBLOCK_TABLE_PREFIX}locks\"'"

finish

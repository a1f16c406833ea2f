#!/usr/bin/env bash
# The command line itself: usage and configuration errors and their exit codes, option
# precedence (command line > environment > config file > default), DSN files, password hygiene,
# and the acquire / renew / release / status cycle a shell script uses. SQLite only.
source "$(dirname "$0")/lib.sh"

out=$E2E_TMP/out
err=$E2E_TMP/err

# expect NAME STATUS PATTERN COMMAND...: exit status, and PATTERN (grep -E) in stderr.
expect() {
  local name=$1 expected=$2 pattern=$3 status=0
  shift 3
  "$@" >"$out" 2>"$err" || status=$?
  assert_eq "$name: exit status" "$expected" "$status"
  if [ -n "$pattern" ]; then
    if grep -qE -- "$pattern" "$err"; then pass "$name: message"; else fail "$name: stderr lacks /$pattern/: $(cat "$err")"; fi
  fi
}

expect "bad duration" 64 "invalid duration '5x'" dblock run k --ttl 5x -- true
expect "bad wait duration" 64 "invalid duration" dblock run k -w soon -- true
expect "control character in key" 64 "control character" dblock run "$(printf 'a\x01b')" -- true
expect "256-byte key" 64 "256 bytes" dblock run "$(printf 'k%.0s' {1..256})" -- true
expect "unknown strategy" 64 "unknown strategy 'sideways'" dblock -s sideways run k -- true
expect "no subcommand" 64 "" dblock
expect "run without a command" 64 "no command given" dblock run k
expect "unknown option" 64 "" dblock run k --frobnicate -- true
expect "ttl too short for the kill grace" 64 "kill-after" dblock run k --ttl 3 --kill-after 5s -- true
expect "ttl below the floor" 64 "use --ttl 3s or more" dblock run k --ttl 2 -- true
expect "bad table prefix" 64 "invalid table prefix" dblock --table-prefix 'x;drop' status
expect "unknown DSN scheme" 78 "unknown scheme" dblock -d redis://localhost/0 status
expect "unknown mysql parameter" 78 "unknown parameter 'frob'" dblock -d 'mysql://u:Sup3rS3cret@127.0.0.1/db?frob=1' status
if grep -q Sup3rS3cret "$err"; then fail "password leaked into a config error"; else pass "config error hides the password"; fi
expect "session strategy on sqlite" 78 "supports only the lease strategy" dblock -s advisory run k -- true
expect "acquire with a session strategy" 78 "works only with the lease strategy" dblock -s for-update acquire k
expect "unwritable sqlite path" 69 "/dev/null/sub" dblock -d sqlite:/dev/null/sub/x.db status
expect "missing dsn file" 78 "cannot read --dsn-file" dblock --dsn-file "$E2E_TMP/none" status
expect "missing DBLOCK_CONFIG" 78 "cannot read" env DBLOCK_CONFIG="$E2E_TMP/none.conf" "$DBLOCK_BIN" status
printf 'bogus-key = 1\n' >"$E2E_TMP/bad.conf"
expect "unknown config key" 78 "bogus" dblock --config "$E2E_TMP/bad.conf" status

dblock --version >"$out"
assert_eq "--version exits 0" 0 $?
check "--version lists every backend" grep -q "sqlite.*mysql\|mysql" "$out"
check "--version names postgres" grep -q postgres "$out"

# Precedence, observed through the table prefix that `schema` prints.
printf 'table-prefix = "conf_"\n' >"$E2E_TMP/p.conf"
prefix_used() { "$DBLOCK_BIN" "$@" schema --dialect sqlite | grep -oE '"[a-z]+_locks"' | head -n 1; }
assert_eq "config file beats the default" '"conf_locks"' "$(env -u DBLOCK_TABLE_PREFIX "$DBLOCK_BIN" --config "$E2E_TMP/p.conf" schema --dialect sqlite | grep -oE '"[a-z]+_locks"' | head -n 1)"
assert_eq "environment beats the config file" '"env_locks"' "$(DBLOCK_TABLE_PREFIX=env_ prefix_used --config "$E2E_TMP/p.conf")"
assert_eq "command line beats the environment" '"cli_locks"' "$(DBLOCK_TABLE_PREFIX=env_ prefix_used --config "$E2E_TMP/p.conf" --table-prefix cli_)"
assert_eq "global option after the subcommand" '"after_locks"' "$("$DBLOCK_BIN" schema --dialect sqlite --table-prefix after_ | grep -oE '"[a-z]+_locks"' | head -n 1)"
assert_eq "DBLOCK_CONFIG names the file" '"conf_locks"' "$(env -u DBLOCK_TABLE_PREFIX DBLOCK_CONFIG="$E2E_TMP/p.conf" "$DBLOCK_BIN" schema --dialect sqlite | grep -oE '"[a-z]+_locks"' | head -n 1)"
mkdir -p "$XDG_CONFIG_HOME/dblock"
printf 'table-prefix = "xdg_"\n' >"$XDG_CONFIG_HOME/dblock/dblock.conf"
if [ ! -e /etc/dblock/dblock.conf ]; then
  assert_eq "XDG config file is read" '"xdg_locks"' "$(env -u DBLOCK_TABLE_PREFIX "$DBLOCK_BIN" schema --dialect sqlite | grep -oE '"[a-z]+_locks"' | head -n 1)"
fi
rm "$XDG_CONFIG_HOME/dblock/dblock.conf"

# The DSN: --dsn-file and the environment, with -v naming the database used.
echo "sqlite:$E2E_TMP/from-file.db" >"$E2E_TMP/dsn"
dblock -v --dsn-file "$E2E_TMP/dsn" status >/dev/null 2>"$err"
check "--dsn-file beats DBLOCK_DSN" grep -q "from-file.db" "$err"
printf 'dsn = "sqlite:%s/from-conf.db"\n' "$E2E_TMP" >"$E2E_TMP/d.conf"
dblock -v --config "$E2E_TMP/d.conf" status >/dev/null 2>"$err"
check "DBLOCK_DSN beats the config file" grep -q "$DBLOCK_DSN" "$err"
env -u DBLOCK_DSN "$DBLOCK_BIN" -v --config "$E2E_TMP/d.conf" status >/dev/null 2>"$err"
check "config file DSN used without DBLOCK_DSN" grep -q "from-conf.db" "$err"

# A config file holding a password must not be readable by others.
printf 'dsn = "mysql://u:Sup3rS3cret@127.0.0.1:1/db"\n' >"$E2E_TMP/secret.conf"
chmod 644 "$E2E_TMP/secret.conf"
env -u DBLOCK_DSN "$DBLOCK_BIN" --config "$E2E_TMP/secret.conf" schema --dialect sqlite >/dev/null 2>"$err"
check "world-readable config with a password warns" grep -q "readable by other users" "$err"
chmod 600 "$E2E_TMP/secret.conf"
env -u DBLOCK_DSN "$DBLOCK_BIN" --config "$E2E_TMP/secret.conf" schema --dialect sqlite >/dev/null 2>"$err"
check "private config does not warn" bash -c "! grep -q 'readable by other users' '$err'"

# A password on the command line is never printed, and -v says ps could see it.
expect "unreachable mysql server" 69 "" dblock -v -d 'mysql://u:Sup3rS3cret@127.0.0.1:1/db?connect-timeout=2' status
check "-v warns that ps saw the password" grep -q "visible to ps" "$err"
if grep -q Sup3rS3cret "$err" "$out"; then fail "password printed"; else pass "password never printed"; fi

# The shell-script cycle: acquire prints the token; renew and release check the holder.
k=$(key cycle)
token=$(dblock acquire "$k" --ttl 30s --owner script-1)
assert_eq "acquire exits 0" 0 $?
check "acquire prints a token" test "$token" -ge 1
assert_status "acquire of a held key conflicts" 75 dblock acquire "$k" --owner script-2
assert_status "acquire -E 9 conflicts with 9" 9 dblock acquire "$k" --owner script-2 -E 9
assert_status "status -q of a held key" 0 dblock status -q "$k"
assert_status "renew by token" 0 dblock renew "$k" --token "$token" --ttl 60s
assert_status "renew by owner" 0 dblock renew "$k" --owner script-1
assert_status "renew by another owner is refused" 76 dblock renew "$k" --owner script-2
assert_status "release by another owner is refused" 76 dblock release "$k" --owner script-2
assert_status "release without a holder is a usage error" 64 dblock release "$k"
assert_status "release by token" 0 dblock release "$k" --token "$token"
assert_status "status -q of a released key" 1 dblock status -q "$k"
token2=$(dblock acquire "$k" --owner script-2)
check "the next token is greater" test "$token2" -gt "$token"
assert_status "release --force" 0 dblock release "$k" --force
assert_status "free after --force" 1 dblock status -q "$k"
assert_status "status -q without a key is a usage error" 64 dblock status -q

dblock status --json "$k" >"$out"
assert_eq "status --json names the key, its state and token" "$k free $token2" \
  "$(json_field locks.0.key locks.0.state locks.0.token <"$out")"
check "status --json holds the documented fields" has_status_fields "$k"


# history lists by start, newest first: a run that started first but finished last (so was
# recorded last) comes below the one that started after it. Own tables: only these two runs.
start_bg long dblock --table-prefix order_ run "$(key early)" -- sleep 1.5
wait_for 10 eval "dblock --table-prefix order_ status -q '$(key early)'"
assert_status "a short run starts while the long one runs" 0 dblock --table-prefix order_ run "$(key late)" -- true
wait_exit long_status "$long"
assert_eq "the long run finished" 0 "$long_status"
assert_eq "history is ordered by start, newest first" "$(key late) $(key early)" \
  "$(dblock --table-prefix order_ history --json | json_field runs.0.key runs.1.key)"
assert_eq "the table too" "$(key late) $(key early)" \
  "$(dblock --table-prefix order_ history -n -o KEY | tr -s ' \n' ' ' | sed 's/ $//')"

finish

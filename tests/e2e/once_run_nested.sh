#!/usr/bin/env bash
# A dblock inside the command of `dblock run` (man/dblock.1, ENVIRONMENT). run keeps its DSN
# text out of the command's environment, so an inner dblock given no DSN must not fall back on
# another database, such as each host's local default where every host's inner run gets token 1:
# it refuses (78) and says how to pass the DSN. A DSN read from a file reaches the same
# database (run passes the file's name on as DBLOCK_DSN_FILE), and so does a config file's DSN
# that is the run's own; a config file that names another database is refused too, and so is
# a default database that is not the run's.
# Two "hosts" share one SQLite file (a farm's server in real life) and each has a default
# database of its own (its XDG_STATE_HOME). As root the hosts run as nobody, so that no
# default database is made under /var/lib/dblock.
source "$(dirname "$0")/lib.sh"

farm=$E2E_TMP/farm
mkdir -p "$farm/h1" "$farm/h2" "$farm/h1/config/dblock"
shared=$farm/shared.db
echo "sqlite:$shared" >"$farm/dsn"
as_user=()
if [ "$(id -u)" -eq 0 ]; then
  command -v setpriv >/dev/null || skip_or_fail "setpriv is needed to drop root"
  chmod 0711 "$E2E_TMP"
  as_user=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups --)
fi

# on HOST VAR=VALUE... -- COMMAND...: COMMAND on HOST, with only the environment given, in
# $farm (for a relative DSN file name).
on() {
  local host=$1
  shift
  local env=()
  while [ "$1" != -- ]; do env+=("$1"); shift; done
  shift
  (cd "$farm" && "${as_user[@]}" env -i PATH="$E2E_TMP/bin:/usr/bin:/bin" HOME="$farm/$host" \
    XDG_STATE_HOME="$farm/$host/state" XDG_CONFIG_HOME="$farm/$host/config" \
    DBLOCK_TABLE_PREFIX="$DBLOCK_TABLE_PREFIX" "${env[@]}" "$@")
}
# The job every host runs under an outer lock of its own: an inner run of the shared key
# migrate, given no DSN; it prints "token N" (the inner command's) and "inner STATUS".
job='cd /; dblock run migrate -- sh -c "echo token \$DBLOCK_TOKEN"; echo "inner $?"'
no_local_default() { [ ! -e "$farm/h1/state/dblock/dblock.db" ] && [ ! -e "$farm/h2/state/dblock/dblock.db" ]; }
shared_token() { dblock -d "sqlite:$shared" status migrate --json | json_field locks.0.token; }

# 1. The DSN given as text (DBLOCK_DSN): refused on both hosts, with the way out.
: >"$farm/err"
if [ ${#as_user[@]} -gt 0 ]; then chown -R nobody "$farm"; fi
for h in h1 h2; do
  on $h DBLOCK_DSN="sqlite:$shared" -- dblock run "deploy-$h" -- sh -c "$job" >"$farm/out.$h" 2>>"$farm/err"
done
assert_eq "DBLOCK_DSN: the inner run is refused (78) on both hosts" "inner 78 inner 78" \
  "$(grep -h '^inner' "$farm/out.h1" "$farm/out.h2" | tr '\n' ' ' | sed 's/ $//')"
check "DBLOCK_DSN: no inner command ran" bash -c "! grep -q '^token' '$farm/out.h1' '$farm/out.h2'"
check "DBLOCK_DSN: no host made a local default database" no_local_default
check "DBLOCK_DSN: the message names the run's database and how to pass the DSN" \
  grep -q "runs inside 'dblock run' on sqlite:$shared (DBLOCK_RUN_DATABASE) and would use the default database.*refused.*--dsn-file" "$farm/err"

# 2. The DSN in a file (DBLOCK_DSN_FILE): both inner runs take the shared key, the tokens
#    continuing from its row (1 was taken directly), not each starting at 1.
on h1 DBLOCK_DSN_FILE="$farm/dsn" -- dblock run migrate -- true
for h in h1 h2; do
  on $h DBLOCK_DSN_FILE="$farm/dsn" -- dblock run "deploy-$h" -- sh -c "$job" >"$farm/out.$h" 2>&1
done
assert_eq "DBLOCK_DSN_FILE: the inner runs took tokens 2 and 3 of the shared key" "token 2 inner 0 token 3 inner 0" \
  "$(cat "$farm/out.h1" "$farm/out.h2" | tr '\n' ' ' | sed 's/ $//')"
check "DBLOCK_DSN_FILE: no host made a local default database" no_local_default

# 3. --dsn-file with a relative name: the command gets its absolute name, and reaches the
#    same database from another directory.
on h1 -- dblock --dsn-file dsn run deploy-h1 -- sh -c "$job" >"$farm/out.h1" 2>&1
assert_eq "--dsn-file dsn: the inner run took token 4" "token 4 inner 0" "$(tr '\n' ' ' <"$farm/out.h1" | sed 's/ $//')"

# 4. A config file's DSN is read again by the inner dblock: the run's own database, accepted.
echo "dsn = \"sqlite:$shared\"" >"$farm/h1/config/dblock/dblock.conf"
if [ ${#as_user[@]} -gt 0 ]; then chown -R nobody "$farm"; fi
on h1 -- dblock run deploy-h1 -- sh -c "$job" >"$farm/out.h1" 2>&1
assert_eq "config file dsn: the inner run took token 5" "token 5 inner 0" "$(tr '\n' ' ' <"$farm/out.h1" | sed 's/ $//')"

# 5. The outer run's DSN from DBLOCK_DSN, a config file naming another database: the inner
#    dblock would read the file's; refused, and that database is not made.
echo "dsn = \"sqlite:$farm/other.db\"" >"$farm/h1/config/dblock/dblock.conf"
on h1 DBLOCK_DSN="sqlite:$shared" -- dblock run deploy-h1 -- sh -c "$job" >"$farm/out.h1" 2>"$farm/err"
assert_eq "config file naming another database: the inner run is refused (78)" "inner 78" "$(cat "$farm/out.h1")"
check "config file naming another database: it was not made" test ! -e "$farm/other.db"
check "config file naming another database: the message names the file's line" \
  grep -q "would use config file $farm/h1/config/dblock/dblock.conf line 1: dsn (sqlite:$farm/other.db), another database: refused" "$farm/err"
rm "$farm/h1/config/dblock/dblock.conf"

# 6. A DSN the inner dblock is given is its own choice: -d names a lock of its own.
on h1 DBLOCK_DSN="sqlite:$shared" -- dblock run deploy-h1 -- \
  sh -c "dblock -d sqlite:$farm/h1/own.db run migrate -- sh -c 'echo token \$DBLOCK_TOKEN'" >"$farm/out.h1" 2>&1
assert_eq "-d inside the run: its own database, token 1" "token 1" "$(cat "$farm/out.h1")"
assert_eq "the shared key is still at token 5" 5 "$(shared_token)"

# 7. No DSN at all: the run's own database is the default, and so is the inner dblock's.
#    One whose default is elsewhere (another XDG_STATE_HOME, as for another user) is refused.
on h2 -- dblock run deploy-h2 -- sh -c "$job" >"$farm/out.h2" 2>&1
assert_eq "default database: the inner run took token 1 of the same default" "token 1 inner 0" \
  "$(tr '\n' ' ' <"$farm/out.h2" | sed 's/ $//')"
on h2 -- dblock run deploy-h2 -- sh -c "XDG_STATE_HOME=$farm/h1/state; export XDG_STATE_HOME; $job" \
  >"$farm/out.h2" 2>&1
assert_eq "another default database: the inner run is refused (78)" "inner 78" "$(grep -v '^dblock:' "$farm/out.h2")"
finish

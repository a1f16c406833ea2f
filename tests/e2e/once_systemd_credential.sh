#!/usr/bin/env bash
# A systemd unit's credential (man/dblock.1, DSN; examples/nightly-report.service):
# LoadCredential=dblock-dsn:/etc/dblock/dsn puts the DSN in $CREDENTIALS_DIRECTORY/dblock-dsn,
# which dblock reads when neither the command line nor DBLOCK_DSN / DBLOCK_DSN_FILE gives one,
# before a config file's DSN. It is trusted like a DSN file. A dblock inside the command of a
# run keeps to the run's database: on the credential's it reads the same file; under a run on
# another database it refuses (78) the credential it inherits.
source "$(dirname "$0")/lib.sh"

unset DBLOCK_DSN
creds=$E2E_TMP/credentials
mkdir -p "$creds"
cred_db=$E2E_TMP/cred.db
echo "sqlite:$cred_db" >"$creds/dblock-dsn"
chmod 0400 "$creds/dblock-dsn"
export CREDENTIALS_DIRECTORY=$creds
token_in() { dblock -d "sqlite:$1" status "$2" --json | json_field locks.0.token; }

# 1. The credential alone: the lock is in its database, not in the default one.
k=$(key job)
dblock run "$k" -- true
check "the credential's database was used" test -e "$cred_db"
assert_eq "its key has token 1 there" 1 "$(token_in "$cred_db" "$k")"

# 2. Precedence: DBLOCK_DSN_FILE, DBLOCK_DSN and -d come first; a config file's DSN after.
echo "sqlite:$E2E_TMP/file.db" >"$E2E_TMP/dsn"
DBLOCK_DSN_FILE=$E2E_TMP/dsn dblock run "$k" -- true
check "DBLOCK_DSN_FILE is used before the credential" test -e "$E2E_TMP/file.db"
DBLOCK_DSN="sqlite:$E2E_TMP/env.db" dblock run "$k" -- true
check "DBLOCK_DSN is used before the credential" test -e "$E2E_TMP/env.db"
mkdir -p "$XDG_CONFIG_HOME/dblock"
echo "dsn = \"sqlite:$E2E_TMP/config.db\"" >"$XDG_CONFIG_HOME/dblock/dblock.conf"
dblock run "$k" -- true
check "a config file's DSN comes after the credential" test ! -e "$E2E_TMP/config.db"
assert_eq "the credential's database got the run (token 2)" 2 "$(token_in "$cred_db" "$k")"
rm "$XDG_CONFIG_HOME/dblock/dblock.conf"

# 3. A run on the credential: the inner dblock, given no DSN, reaches the same database.
dblock run outer -- sh -c "dblock run '$k' -- sh -c 'echo token \$DBLOCK_TOKEN'" >"$E2E_TMP/out" 2>&1
assert_eq "inside a run on the credential, the inner run took token 3 there" "token 3" "$(cat "$E2E_TMP/out")"

# 4. A run on another database, the credential inherited: the inner dblock refuses it.
dblock -d "sqlite:$E2E_TMP/other.db" run outer -- sh -c "dblock run '$k' -- echo ran; echo inner \$?" \
  >"$E2E_TMP/out" 2>"$E2E_TMP/err"
assert_eq "inside a run on another database, the credential is refused (78)" "inner 78" "$(cat "$E2E_TMP/out")"
check "the message names the credential" grep -qF "would use the systemd credential $creds/dblock-dsn" "$E2E_TMP/err"
assert_eq "the credential's key is still at token 3" 3 "$(token_in "$cred_db" "$k")"

# 5. A credential others may write is refused like a DSN file.
chmod 0622 "$creds/dblock-dsn"
assert_status "a credential file others may write is refused" 78 dblock run "$k" -- true
chmod 0400 "$creds/dblock-dsn"

# 6. A credentials directory without dblock-dsn (a unit's other credentials): the config file's.
rm -f "$creds/dblock-dsn"
echo "dsn = \"sqlite:$E2E_TMP/config.db\"" >"$XDG_CONFIG_HOME/dblock/dblock.conf"
dblock run "$k" -- true
check "without dblock-dsn in it, the config file's DSN" test -e "$E2E_TMP/config.db"
finish

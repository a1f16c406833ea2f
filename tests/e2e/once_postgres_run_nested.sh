#!/usr/bin/env bash
# What `dblock run` tells its command never configures a dblock inside it (man/dblock.1,
# ENVIRONMENT): under an advisory run, the man page's acquire example takes a lease and an
# inner run given no --strategy holds its key as a lease, as they would outside. The command
# learns the run's strategy and database (DBLOCK_RUN_STRATEGY, DBLOCK_RUN_DATABASE with the
# password hidden) and, for a DSN read from a file, the file's name, never the DSN text.
source "$(dirname "$0")/lib.sh"

k=$(key outer)
inner=$(key inner)
dsn_file=$E2E_TMP/dsn
(umask 077 && echo "$DBLOCK_DSN" >"$dsn_file")
password=${DBLOCK_DSN#*://}
password=${password%%@*}
password=${password#*:}

# The caller sets no strategy: the outer run's advisory comes from its command line.
outer() { env -u DBLOCK_STRATEGY -u DBLOCK_DSN dblock --dsn-file "$dsn_file" -s advisory run "$k" -- "$@"; }

# The man page's acquire example, inside the advisory run, with the DSN file it inherits.
example='token=$(dblock acquire "$1" --ttl 2m -E 0) || exit $?
[ -n "$token" ] || exit 3
echo "token $token"
dblock release "$1" --token "$token"'
outer sh -c "$example" sh "$inner-acquire" >"$E2E_TMP/out" 2>"$E2E_TMP/err"
assert_eq "acquire inside an advisory run: exit status" 0 "$?"
check "acquire inside an advisory run printed a token" grep -qE '^token [1-9][0-9]*$' "$E2E_TMP/out"
[ -s "$E2E_TMP/err" ] && echo "      stderr: $(cat "$E2E_TMP/err")"

# An inner run with no --strategy holds its key as a lease (its history says so).
outer dblock --dsn-file "$dsn_file" run "$inner-run" -- true
assert_eq "inner run inside an advisory run: exit status" 0 "$?"
assert_eq "the inner run held its key as a lease" lease "$(history_field "$inner-run" runs.0.strategy)"
assert_eq "the outer run held its key as advisory" advisory "$(history_field "$k" runs.0.strategy)"

# What the command is told.
outer env >"$E2E_TMP/env"
check "DBLOCK_RUN_STRATEGY=advisory" grep -qx "DBLOCK_RUN_STRATEGY=advisory" "$E2E_TMP/env"
check "no DBLOCK_STRATEGY: run sets none, and the caller gave none" bash -c "! grep -q '^DBLOCK_STRATEGY=' '$E2E_TMP/env'"
check "DBLOCK_DSN_FILE is the DSN file's name" grep -qx "DBLOCK_DSN_FILE=$dsn_file" "$E2E_TMP/env"
check "DBLOCK_RUN_DATABASE names the server, the password hidden" \
  grep -qE "^DBLOCK_RUN_DATABASE=postgres://[^:@]+:\*\*\*\*@" "$E2E_TMP/env"
# The DSN given as text: the command gets neither the text nor a file name.
# (Only the variables dblock needs: the harness's own hold the test servers' passwords.)
env -i PATH="$PATH" DBLOCK_DSN="$DBLOCK_DSN" DBLOCK_TABLE_PREFIX="$DBLOCK_TABLE_PREFIX" dblock run "$k" -- env >"$E2E_TMP/env"
check "DSN given as text: the command's environment holds no DBLOCK_DSN or DBLOCK_DSN_FILE" \
  bash -c "! grep -qE '^DBLOCK_DSN(_FILE)?=' '$E2E_TMP/env'"
check "DSN given as text: the password is nowhere in the command's environment" \
  bash -c '! grep -qF -- "$1" "$2"' _ "$password" "$E2E_TMP/env"
finish

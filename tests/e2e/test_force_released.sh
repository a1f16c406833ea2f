#!/usr/bin/env bash
# A lease holder whose lock was taken from it (dblock(1), release): its renew and release exit 76
# and say what the key's row tells: released by another command (`release --force`) and when;
# taken since by a later token, whose owner and since when; the lease expired and when. A
# release that finds its lock released by another command says it only with -v (said once:
# once_shell_pattern.sh runs the README's pattern through a release --force).
# cells: sqlite:lease|mysql:lease|postgres:lease
source "$(dirname "$0")/lib.sh"

k=$(key forced)
err=$E2E_TMP/err
token=$(dblock acquire "$k" --ttl 30s --owner script-a)
check "acquired ($token)" test -n "$token"
assert_status "an operator's release --force" 0 dblock release "$k" --force

dblock renew "$k" --token "$token" --ttl 30s 2>"$err"
assert_eq "the holder's renew exits 76" 76 $?
sed 's/^/    | /' "$err"
assert_eq "one line" 1 "$(wc -l <"$err")"
check "it says the lock was released, when, and that release --force may have done it" \
  grep -Eq "^dblock: '$k': the lock $k was released at 20[0-9-]+T[0-9:.]+Z \([^)]* ago\) while token $token held it, not by this command: by \`dblock release --force\`" "$err"
check "and that token $token holds it no more" grep -q "token $token holds it no more$" "$err"
# Its release (the shell pattern's trap, after that renew) exits 76 too, and does not say it
# again: there is nothing left to release; -v says it.
dblock release "$k" --token "$token" 2>"$err"
assert_eq "its release exits 76" 76 $?
assert_eq "and prints nothing" "" "$(cat "$err")"
dblock -v release "$k" --token "$token" 2>"$err"
assert_eq "with -v, exits 76" 76 $?
check "and says the same" grep -q "was released at .* while token $token held it, not by this command" "$err"
dblock -v release "$k" --owner script-a 2>"$err"
check "by owner too" grep -q "was released at .* while owner script-a held it" "$err"

# Taken since by another holder.
other=$(dblock acquire "$k" --ttl 30s --owner script-b)
dblock renew "$k" --token "$token" --ttl 30s 2>"$err"
assert_eq "renew of the old token once another holds it exits 76" 76 $?
sed 's/^/    | /' "$err"
check "it names the token that took it, its owner and when" \
  grep -q "is not held by token $token: token $other (script-b) took it at 20.*Z (" "$err"

# Expired, nobody took it.
k2=$(key expired)
t2=$(dblock acquire "$k2" --ttl 1s)
sleep 1.3
dblock renew "$k2" --token "$t2" --ttl 30s 2>"$err"
status=$?
sed 's/^/    | /' "$err"
if [ "$status" = 76 ]; then
  check "an expired lease: it says when it expired" grep -q "the lease of token $t2 on $k2 expired at 20.*Z (.* ago), before this renew" "$err"
else
  assert_eq "an expired lease nobody took is renewed" 0 "$status"
fi
finish

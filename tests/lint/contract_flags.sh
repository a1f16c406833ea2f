#!/usr/bin/env bash
# The dialect contract (docs/backend-contract.md) carries statements and expressions, not
# capability flags or predicates for core to branch on: a native error core must tell apart is
# an ErrorKind the dialect's error file sets (core/error.hpp), and a difference in what to run
# is in the statements themselves. Checked: no function pointer and no bool member in the
# contract's statement structs (core/sql/statements.hpp, failover.hpp), no bool member in what a
# dialect spells (rules.hpp Dialect and OwnLease, tables.hpp SchemaDialect: its expression
# functions are the contract, a yes or no is not), and no `virtual bool` on the sessions a
# dialect writes (core/sql/sql_session.hpp Session, core/sql/session_locker.hpp HolderSession):
# not one that judges an Error, and not one that says what the dialect can do (whether its
# holder runs two statements as one, or chains a numbering): core reads that from the
# statements given (one present or empty) and from what it measured (the lock session's
# handshake). A yes or no about the session's state now is listed in `states`; the flags still
# there are listed in `allowed`, which their own work removes; that list only shrinks.
set -u
top=${1:-${DBLOCK_SOURCE_DIR:?usage: contract_flags.sh SOURCE_DIR}}
sql=$top/src/core/sql
# None left: whether check_schema asks for an added column is read from the column's one
# description (SchemaStatements::Added::described, tables.hpp Column). (A take that explains its
# refusal or reads the failover gate, and a release that tells the waiters and so commits alone,
# say so in their answers and parameters: lock_steps.hpp.)
allowed='^$'
# What a session is in at this moment, which changes as it runs: a fact core asks of it, not
# something the dialect can or cannot do. A new name here needs that reason.
states='^(transaction_open)$'

# Members of the structs named *Statements: "bool name" (a flag) or "(*name)(" (a predicate);
# of a dialect's expressions: "bool name".
found=$(awk '
  /^struct [A-Za-z]*Statements[ {]/ { inside = 1; expressions = 0 }
  /^struct (Dialect|OwnLease|SchemaDialect)[ {]/ { inside = 1; expressions = 1 }
  inside && /^};/ { inside = 0 }
  inside && match($0, /^[[:space:]]+bool[[:space:]]+[a-z_]+[[:space:]]*(=[^;]*)?;/) {
    line = $0; sub(/^[[:space:]]+bool[[:space:]]+/, "", line); sub(/[[:space:]=;].*/, "", line)
    print FILENAME ":" FNR ": flag " line
  }
  inside && !expressions && match($0, /\(\*[a-z_]+\)\(/) {
    line = substr($0, RSTART + 2); sub(/\).*/, "", line)
    print FILENAME ":" FNR ": predicate " line
  }
' "$sql/statements.hpp" "$sql/failover.hpp" "$sql/rules.hpp" "$sql/tables.hpp")
# The sessions' yes/no virtuals: "virtual bool name(const Error&" a predicate, any other a flag.
virtuals=$(awk -v states="$states" '
  /^class (Session|HolderSession)[ {]/ { inside = 1 }
  inside && /^};/ { inside = 0 }
  inside && match($0, /virtual[[:space:]]+bool[[:space:]]+[a-z_]+\(/) {
    name = substr($0, RSTART, RLENGTH - 1); sub(/.*[[:space:]]/, "", name)
    if (name ~ states) next
    print FILENAME ":" FNR ": " ($0 ~ /\(const Error&/ ? "predicate " : "flag ") name
  }
' "$sql/sql_session.hpp" "$sql/session_locker.hpp")
all=$(printf '%s\n%s\n' "$found" "$virtuals" | grep -v '^$')

status=0
while IFS= read -r hit; do
  [ -z "$hit" ] && continue
  name=${hit##* }
  if [[ $name =~ $allowed ]]; then
    echo "still listed: $hit"
  else
    echo "a capability flag or error predicate in the dialect contract: $hit"
    status=1
  fi
done <<<"$all"
echo "$(grep -c . <<<"$all") flag(s) or predicate(s) in the contract"
exit $status

#!/usr/bin/env bash
# The dialect contract (docs/backend-contract.md) carries statements and expressions, not
# capability flags or predicates for core to branch on: a native error core must tell apart is
# an ErrorKind the dialect's error file sets (core/error.hpp), and a difference in what to run
# is in the statements themselves. Checked: no function pointer and no bool member in the
# contract's statement structs (core/sql/statements.hpp, failover.hpp), no bool member in what a
# dialect spells (rules.hpp Dialect and OwnLease, tables.hpp SchemaDialect: its expression
# functions are the contract, a yes or no is not), and no Session virtual
# that judges an Error (core/sql/sql_session.hpp), beyond the few still listed below, which
# their own work removes; the list only shrinks.
set -u
top=${1:-${DBLOCK_SOURCE_DIR:?usage: contract_flags.sh SOURCE_DIR}}
sql=$top/src/core/sql
# None left: whether check_schema asks for an added column is read from the column's one
# description (SchemaStatements::Added::described, tables.hpp Column). (A take that explains its
# refusal or reads the failover gate, and a release that tells the waiters and so commits alone,
# say so in their answers and parameters: lock_steps.hpp.)
allowed='^$'

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
virtuals=$(grep -nE 'virtual bool [a-z_]+\(const Error&' "$sql/sql_session.hpp" | sed "s|^|$sql/sql_session.hpp:|; s|: *virtual bool \([a-z_]*\).*|: predicate \1|")
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

#!/usr/bin/env bash
# A dialect runs every statement alike: what a statement means to the strategy (a lease's take,
# its release, a session lock taken, its claims row made) is core's to say, through a call core
# makes at that site (the wake primitive's taking/took/releasing/reading_taken hooks,
# core/sql/waiters.hpp; the holder session's holding/claim_made, core/sql/session_locker.hpp),
# never a rule a backend keys on the statement's id. Checked: no file under src/backends compares
# a statement id (`st.id == "lease.take"`, `"..." == x.id`, `x.id.starts_with(...)`), beyond the
# sites listed in `still` (none left; the list only shrinks). And no server connection file
# writes a statement of its own (below).
set -u
top=${1:-${DBLOCK_SOURCE_DIR:?usage: statement_ids.sh SOURCE_DIR}}
backends=$top/src/backends

# Per file, at most this many comparisons: none are left.
declare -A still=()

if [ ! -d "$backends" ]; then
  echo "missing: $backends"
  exit 1
fi
pattern='\.id *[!=]= *|[!=]= *[A-Za-z_>.-]*\.id\b|\bid *[!=]= *"|"[^"]*" *[!=]= *[A-Za-z_]*id\b|\.id\.(starts_with|ends_with|find|rfind|compare|substr)\('

status=0
declare -A seen=()
while IFS= read -r hit; do
  [ -z "$hit" ] && continue
  file=${hit%%:*}
  rel=${file#"$backends"/}
  seen[$rel]=$((${seen[$rel]:-0} + 1))
  if [ -z "${still[$rel]:-}" ]; then
    echo "a backend keys a rule on a statement's id: $hit"
    echo "  say it where core runs the statement (a hook it calls there), not by the id"
    status=1
  fi
done < <(grep -rnoE --include='*.cpp' --include='*.hpp' "$pattern" "$backends")

for rel in "${!still[@]}"; do
  n=${seen[$rel]:-0}
  echo "still listed: $rel ($n of at most ${still[$rel]})"
  if [ "$n" -gt "${still[$rel]}" ]; then
    echo "  $rel compares statement ids more often than listed: the list only shrinks"
    status=1
  fi
done
# The statements a server connection sends are core's, listed by `dblock schema --statements`:
# a connection file writes no statement of its own (the waits ahead of a lease take were written
# there, and went unlisted: issue 49), nor does a holder session, PostgreSQL's or MySQL's (their
# numbering gate's were written there, unlisted: PostgreSQL's with the gate's number in their
# text, MariaDB's a GET_LOCK of its own, and a give-back and take in one). Its session settings (SET,
# LISTEN), a transaction's end (COMMIT, ROLLBACK) and how it sends two statements in one round
# trip (a block around them) are its own.
while IFS= read -r hit; do
  [ -z "$hit" ] && continue
  echo "a connection writes a statement of its own: $hit"
  echo "  write it in core (src/core/sql), from the dialect's expressions, and list it (StatementCatalog)"
  status=1
done < <(grep -nE '"(SELECT|DO|INSERT|UPDATE|DELETE|WITH) ' "$backends"/mysql/mysql_connection.cpp \
  "$backends"/postgres/postgres_connection.cpp "$backends"/postgres/postgres_session_lock.cpp \
  "$backends"/mysql/mysql_session_lock.cpp)

total=0
for n in "${seen[@]}"; do total=$((total + n)); done
echo "$total statement id comparison(s) under src/backends"
exit $status

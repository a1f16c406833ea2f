#!/usr/bin/env bash
# The size of the dialect contract (docs/backend-contract.md, "The dialect contract, counted"):
# what each dialect writes in src/backends/<name>/<name>_statements.cpp, counted as
#   expressions: the members its sql::Dialect and sql::tables::SchemaDialect initializers give
#                a value of their own (a member left {} or "" is not written; OwnLease's members
#                count one each, the aggregate itself not);
#   statements:  each statement slot it assigns there ("x.member =" or "+="; a list such as
#                doctor's checks counts once), and each statement it returns whole ({"id", ...}
#                outside such an assignment).
# The goal is at most 25 each; a dialect may not grow past its bound below, which only
# shrinks as statements move into core (core/sql/rules.hpp). Capability flags are
# contract_flags.sh's.
set -u
top=${1:-${DBLOCK_SOURCE_DIR:?usage: contract_count.sh SOURCE_DIR}}

# MySQL's 56 includes MariaDB's lock.claim_nowait without NOWAIT, which on MariaDB refuses to
# wait for a table's metadata lock too (e2e.*.table_lock_not_busy), and wake.taken_holding, the
# row-lock strategies' token read that takes the wake name in the same round trip.
# 56 -> 59: MariaDB's advisory take that locks and numbers in one statement (its _try and _wait
# slots) and advisory_release_row (the release and the unlock in one statement): an advisory run
# went from 11 round trips on two connections to 8 on one. A debt to pay back into core.
# 53/59/31 -> 47/53/21: core's forms became the Dialect and SchemaDialect members' defaults
# (identity casts, IS NOT DISTINCT FROM, START TRANSACTION, RETURNING, ON CONFLICT, the take as
# upsert + RETURNING, no server sessions, CREATE INDEX IF NOT EXISTS), and lock_row and
# txn-insert's plain insert_claim moved into core: a dialect writes only what differs.
# 47/53 -> 43/52: a dialect gives its session-lock primitive (Dialect::session_lock: take with or
# without waiting, the wait's bound, give back, who holds) and core writes the statements around
# it: PostgreSQL's advisory statements, lock_timeout and its lease waiters' queue; MySQL's
# advisory_holds and give_back and its named-lock wake (wake.*); and session.take with the
# dialect's RETURNING (PostgreSQL's).
# 43/52 -> 41/51: core's forms of a lease running (its expires_at after now, IS TRUE) and of
# --min-interval (the last start plus the interval not after now, through plus_ms): PostgreSQL
# gives neither, MySQL only the milliseconds since the last start (its times keep microseconds).
# 41/51 -> 40/50: lock.make_claim is core's, the dialect's upsert that leaves a row alone (any
# unique key: Upsert::key ""); MySQL's was INSERT IGNORE, which also turned errors into warnings.
# 40/50 -> 39/48: core opens a release's transaction with `begin` and a SELECT of the dialect's
# unsynced_commit (PostgreSQL's begin_unsynced), asks doctor's server line with version()
# (MySQL's), and writes the schema script's note on DDL without a transaction (MySQL's).
declare -A bound=([postgres]=39 [mysql]=48 [sqlite]=21)

count() {
  local f=$1
  local expressions statements returned
  expressions=$(awk '
    /^const sql::(tables::)?(Schema)?Dialect [a-z_]+ *(=.*)?\{/ { inside = 1; next }
    inside && /^};/ { inside = 0 }
    inside && /^[[:space:]]+\.[a-z_]+ =( |$)/ && !/= (\{\}|""),?( |$)/ && !/= \{$/ { n++ }
    END { print n + 0 }' "$f")
  statements=$(grep -cE '^\s+[a-z]\.[a-z_.]+ \+?= ' "$f")
  returned=$(grep -vE '^\s+[a-z]\.[a-z_.]+ \+?= ' "$f" | grep -oE '\{"[a-z_]+\.[a-z_]+"' | wc -l)
  echo "$expressions $statements $returned"
}

status=0
for name in postgres mysql sqlite; do
  f=$top/src/backends/$name/${name}_statements.cpp
  if [ ! -f "$f" ]; then
    echo "missing: $f"
    status=1
    continue
  fi
  read -r e s r < <(count "$f")
  total=$((e + s + r))
  echo "$name: $total ($e expressions, $((s + r)) statements; bound ${bound[$name]}, goal 25)"
  if [ "$e" -eq 0 ]; then
    echo "  counted no expression: the initializers' shape changed, so this count must follow it"
    status=1
  elif [ "$total" -gt "${bound[$name]}" ]; then
    echo "  the $name dialect writes more than its bound: write the rule once in core (core/sql/rules.hpp)"
    status=1
  fi
done
exit $status

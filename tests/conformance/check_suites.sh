#!/usr/bin/env bash
# ctest's conformance.suites: every case of dblock_conformance ($1) sits in a suite some cell
# runs (tests/CMakeLists.txt runs a cell as -ts=all,<kind>,<backend>,<backend>.<kind>), the
# common suites (all, lease, session) come from tests/conformance/ and the backends' own from
# tests/backends/, and it prints how many cases each cell runs.
set -euo pipefail
bin=$1
count() {  # count [doctest filters...]: cases passing the filters
  "$bin" -ltc "$@" | sed -n 's/.*test cases passing the current filters: \([0-9]*\).*/\1/p'
}
known=all,lease,session,sqlite,mysql,postgres,mysql.lease,mysql.session,postgres.lease,postgres.session
total=$(count)
in_known=$(count -ts="$known")
for cell in sqlite:lease mysql:lease mysql:session postgres:lease postgres:session; do
  backend=${cell%:*} kind=${cell#*:}
  echo "$cell: $(count -ts="all,$kind,$backend,$backend.$kind") cases (common: $(count -ts="all,$kind"))"
done
if [ "$total" != "$in_known" ]; then
  echo "FAIL  $((total - in_known)) of $total cases are in no suite a cell runs:"
  "$bin" -ltc -tse="$known" | grep -v '^\[doctest\]' | grep -v '^=*$' | sed 's/^/      /'
  exit 1
fi
echo "ok    all $total cases are in a cell's suites"
# The XML listing names each case's file and suite.
common='testsuite="(all|lease|session)"'
cases=$("$bin" -ltc -r=xml | grep '<TestCase ')
misplaced=$(
  grep -E "filename=\"([^\"]*/)?tests/conformance/" <<<"$cases" | grep -Ev "$common" || true
  grep -E "filename=\"([^\"]*/)?tests/backends/" <<<"$cases" | grep -E "$common" || true
)
if [ -n "$misplaced" ]; then
  echo "FAIL  tests/conformance/ holds the common suites only, tests/backends/ the backends' own:"
  sed 's/^ */      /' <<<"$misplaced"
  exit 1
fi
echo "ok    tests/conformance/ holds the common suites, tests/backends/ the backends' own"

#!/usr/bin/env bash
# The man page is lint-clean (`mandoc -T lint` prints nothing, style messages included) and
# its .TH line carries the project's version and a date mandoc can parse.
source "$(dirname "$0")/lib.sh"

command -v mandoc >/dev/null || skip_or_fail "mandoc is not installed (scripts/install-deps.sh)"
page=$DBLOCK_SOURCE_DIR/man/dblock.1
lint=$(mandoc -T lint "$page" 2>&1)
[ -z "$lint" ] || sed 's/^/      /' <<<"$lint"
assert_eq "mandoc -T lint man/dblock.1 is clean" 0 "$(grep -c . <<<"$lint")"
version=$(sed -n 's/^project(dblock VERSION \([0-9.]*\).*/\1/p' "$DBLOCK_SOURCE_DIR/CMakeLists.txt")
th=$(grep -m1 '^\.TH ' "$page")
check ".TH names dblock $version ($th)" grep -q "\"dblock $version\"" <<<"$th"
check ".TH has an ISO date" grep -Eq '^\.TH DBLOCK 1 [0-9]{4}-[0-9]{2}-[0-9]{2} ' <<<"$th"
finish

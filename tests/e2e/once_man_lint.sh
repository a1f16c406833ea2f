#!/usr/bin/env bash
# The man page is lint-clean (`mandoc -T lint` prints nothing, style messages included) and
# its .TH line carries the project's version and a date mandoc can parse.
source "$(dirname "$0")/lib.sh"

command -v mandoc >/dev/null || skip_or_fail "mandoc is not installed (scripts/install-deps.sh)"
page=$DBLOCK_SOURCE_DIR/man/dblock.1
lint=$(mandoc -T lint "$page" 2>&1)
[ -z "$lint" ] || sed 's/^/      /' <<<"$lint"
assert_eq "mandoc -T lint man/dblock.1 is clean" 0 "$(grep -c . <<<"$lint")"
# At 80 columns groff (man --warnings) finds nothing to say and no line runs past the edge:
# tables and the SYNOPSIS fit a terminal.
if command -v man >/dev/null; then
  warnings=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
  [ -z "$warnings" ] || sed 's/^/      /' <<<"$warnings"
  assert_eq "man --warnings at 80 columns is clean" 0 "$(grep -c . <<<"$warnings")"
  widest=$(MANWIDTH=80 man -l "$page" 2>/dev/null | awk '{ if (length > m) m = length } END { print m + 0 }')
  check "no line of the page at 80 columns is wider than 80 ($widest)" test "$widest" -le 80
else
  skip_or_fail "man is not installed (scripts/install-deps.sh)"
fi
version=$(sed -n 's/^project(dblock VERSION \([0-9.]*\).*/\1/p' "$DBLOCK_SOURCE_DIR/CMakeLists.txt")
th=$(grep -m1 '^\.TH ' "$page")
check ".TH names dblock $version ($th)" grep -q "\"dblock $version\"" <<<"$th"
check ".TH has an ISO date" grep -Eq '^\.TH DBLOCK 1 [0-9]{4}-[0-9]{2}-[0-9]{2} ' <<<"$th"
finish

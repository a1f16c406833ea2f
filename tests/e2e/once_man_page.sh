#!/usr/bin/env bash
# The man page documents every option the binary accepts: collects each --long-option
# that `dblock --help` and `dblock SUB --help` print and fails, naming them, if man/dblock.1 lacks
# one (written \-\-opt in roff); also fails if a section the page must have is missing.
#   DBLOCK_BIN        the binary (default: build/dblock)
#   DBLOCK_SOURCE_DIR the repository root (default: this script's ../..)
#   DBLOCK_MAN_PAGE   the page to check (default: $DBLOCK_SOURCE_DIR/man/dblock.1)
set -euo pipefail

source_dir=${DBLOCK_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bin=${DBLOCK_BIN:-$source_dir/build/dblock}
page=${DBLOCK_MAN_PAGE:-$source_dir/man/dblock.1}
subcommands=(run acquire renew release status history init schema doctor check metrics)
sections=(NAME SYNOPSIS DESCRIPTION SUBCOMMANDS OPTIONS DSN STRATEGIES "EXIT STATUS" ENVIRONMENT FILES NOTES EXAMPLES "SEE ALSO")

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "ok    $1"; }
fail() { failed=$((failed + 1)); echo "FAIL  $1"; }
finish() {
  echo "$passed passed, $failed failed"
  if [ "$failed" -eq 0 ]; then exit 0; else exit 1; fi
}

if [ ! -x "$bin" ]; then fail "no executable dblock at $bin"; finish; fi
if [ ! -r "$page" ]; then fail "no man page at $page"; finish; fi

# Every --long-option any help text prints. A help text that cannot be printed is a failure
# in itself: it would hide options from this check.
help_text=""
for args in "" "${subcommands[@]}"; do
  # shellcheck disable=SC2086  # $args is empty or one word
  if out=$(timeout 10 "$bin" $args --help 2>&1); then
    help_text+=$out$'\n'
  else
    fail "dblock $args --help exited non-zero"
  fi
done
mapfile -t options < <(grep -oE -- '(^|[^A-Za-z0-9-])--[a-z][a-z0-9-]*' <<<"$help_text" |
                       sed -E 's/^[^-]*//' | sort -u)
if [ "${#options[@]}" -lt 10 ]; then
  fail "found only ${#options[@]} long options in the help texts; the parser is broken"
  finish
fi

# The page as plain text for matching: \- becomes -, font escapes (\fB, \fI, \fR, \fP, \f(CW) go.
plain=$(sed -E -e 's/\\-/-/g' -e 's/\\f(\([A-Za-z]{2}|\[[A-Za-z]*\]|[A-Za-z])//g' "$page")

missing=()
for opt in "${options[@]}"; do
  if grep -qE -- "(^|[^A-Za-z0-9-])${opt}([^A-Za-z0-9-]|\$)" <<<"$plain"; then
    pass "option $opt is documented"
  else
    missing+=("$opt")
    fail "option $opt is printed by --help but missing from $page"
  fi
done

for section in "${sections[@]}"; do
  if grep -qE "^\.SH +\"?${section}\"?[[:space:]]*\$" "$page"; then
    pass "section $section"
  else
    fail "section $section is missing from $page"
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then echo "missing options: ${missing[*]}"; fi
finish

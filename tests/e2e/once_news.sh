#!/usr/bin/env bash
# NEWS keeps up with the version: its newest entry is the version dblock --version reports
# (and the Debian changelog's), and the entry before it names the commit the rolling-upgrade
# tests build as the previous release (tests/upgrade/build_previous.sh).
source "$(dirname "$0")/lib.sh"

news=$DBLOCK_SOURCE_DIR/NEWS
version=$(dblock --version | awk 'NR == 1 { print $2 }')
headings=$(grep -E '^[0-9]+\.[0-9]+\.[0-9]+ \([0-9]{4}-[0-9]{2}-[0-9]{2}\)$' "$news" | cut -d' ' -f1)
assert_eq "NEWS's newest entry is this version" "$version" "$(sed -n 1p <<<"$headings")"
assert_eq "the Debian changelog's newest entry is this version" "dblock ($version)" \
  "$(head -n 1 "$DBLOCK_SOURCE_DIR/packaging/changelog" | cut -d' ' -f1-2)"
previous=$(sed -n 2p <<<"$headings")
check "NEWS has an entry before $version ($previous)" test -n "$previous"
cut_from=$(awk -v v="$previous" '$1 == v { on = 1; next } on && /Cut from:/ { print $3; exit }' "$news")
pinned=$(sed -n 's/^commit=\([0-9a-f]*\)$/\1/p' "$DBLOCK_SOURCE_DIR/tests/upgrade/build_previous.sh")
assert_eq "the upgrade tests build $previous from the commit NEWS names" "$cut_from" "$pinned"
if git -C "$DBLOCK_SOURCE_DIR" rev-parse -q --verify "$pinned^{commit}" >/dev/null 2>&1; then
  assert_eq "that commit reports $previous" "project(dblock VERSION $previous LANGUAGES C CXX)" \
    "$(git -C "$DBLOCK_SOURCE_DIR" show "$pinned:CMakeLists.txt" | grep -m1 '^project(dblock')"
else
  fail "commit $pinned is not in this clone's history (a shallow clone? git fetch --unshallow)"
fi
finish

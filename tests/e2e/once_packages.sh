#!/usr/bin/env bash
# Debian packages (cmake/Packaging.cmake): cpack builds dblock, dblock-mysql and
# dblock-postgres from the build tree; lintian finds no errors and nothing about the copyright
# files, which give MIT (Expat) for dblock and the licence of each part built in; only the module packages
# depend on a server client library; unpacked into a throwaway root, the installed binary
# prints its version, runs a job on SQLite, loads a packaged module, and its man page renders.
# Also `cmake --install --strip` into a user prefix.
source "$(dirname "$0")/lib.sh"

for tool in cpack dpkg-deb dpkg-shlibdeps lintian man; do
  command -v "$tool" >/dev/null || skip_or_fail "$tool is not installed (scripts/install-deps.sh)"
done
build=$(dirname "$(readlink -f "$DBLOCK_BIN")")
version=$(sed -n 's/^project(dblock VERSION \([0-9.]*\).*/\1/p' "$DBLOCK_SOURCE_DIR/CMakeLists.txt")
check "the project version is known ($version)" test -n "$version"

pkgs=$E2E_TMP/pkgs
mkdir -p "$pkgs"
assert_status "cpack builds the packages" 0 \
  bash -c 'cd "$1" && cpack --config "$2/CPackConfig.cmake" -B "$1" >cpack.log 2>&1 || { cat cpack.log; exit 1; }' _ "$pkgs" "$build"
main=$pkgs/dblock_${version}_amd64.deb
mysql=$pkgs/dblock-mysql_${version}_amd64.deb
postgres=$pkgs/dblock-postgres_${version}_amd64.deb
for deb in "$main" "$mysql" "$postgres"; do check "built $(basename "$deb")" test -s "$deb"; done
for deb in "$main" "$mysql" "$postgres"; do echo "      $(basename "$deb"): $(stat -c %s "$deb") bytes"; done

lint=$(lintian --tag-display-limit 0 "$main" "$mysql" "$postgres" 2>&1 | grep -v 'running with root privileges')
[ -z "$lint" ] || sed 's/^/      lintian: /' <<<"$lint"
assert_eq "lintian reports no errors" "" "$(grep '^E:' <<<"$lint")"
# Copyright tags at every level, pedantic and informational included.
copyright_tags=$(lintian -I -E --pedantic --tag-display-limit 0 "$main" "$mysql" "$postgres" 2>&1 | grep -i copyright)
assert_eq "lintian has nothing to say about the copyright files" "" "$copyright_tags"
# The licence: MIT (Expat) for dblock's own files, and a licence for each component built in.
for deb in "$main" "$mysql" "$postgres"; do
  copyright=$(dpkg-deb --fsys-tarfile "$deb" | tar -xOf - "./usr/share/doc/$(dpkg-deb -f "$deb" Package)/copyright")
  check "$(basename "$deb"): dblock's files are under the MIT (Expat) licence" \
    grep -Pzq 'Files: \*\nCopyright: [0-9-]+ the dblock authors\nLicense: Expat\n' <<<"$copyright"
  for component in "CLI/\*" "nlohmann/\*"; do
    check "$(basename "$deb"): the copyright file covers $component" grep -q "^Files: $component" <<<"$copyright"
  done
  check "$(basename "$deb"): no 'all rights reserved'" bash -c '! grep -qi "all.rights.reserved" <<<"$1"' _ "$copyright"
done
check "LICENSE is MIT, the dblock authors" \
  eval 'head -3 "$DBLOCK_SOURCE_DIR/LICENSE" | grep -q "^MIT License" && grep -q "^Copyright (c) [0-9]* the dblock authors" "$DBLOCK_SOURCE_DIR/LICENSE"'

depends_main=$(dpkg-deb -f "$main" Depends)
# SQLite is linked in when the build found its static library (DBLOCK_STATIC_SQLITE), and then
# nothing is left to depend on; a build against the shared library depends on it.
if [ "${DBLOCK_SQLITE_LINK:-static}" = static ]; then
  check "dblock depends on no SQLite library (linked in: $depends_main)" bash -c '! grep -q libsqlite3 <<<"$1"' _ "$depends_main"
else
  check "dblock depends on SQLite ($depends_main)" grep -q libsqlite3 <<<"$depends_main"
fi
check "dblock depends on libsmartcols (loaded with dlopen for tables)" grep -q libsmartcols1 <<<"$depends_main"
check "dblock depends on no server client library" bash -c '! grep -Eq "libpq|libmariadb|libmysqlclient" <<<"$1"' _ "$depends_main"
check "dblock-mysql depends on libmariadb and this dblock" \
  eval 'dpkg-deb -f "$mysql" Depends | grep "libmariadb" | grep -q "dblock (= $version)"'
check "dblock-postgres depends on libpq and this dblock" \
  eval 'dpkg-deb -f "$postgres" Depends | grep "libpq" | grep -q "dblock (= $version)"'
listing=$(dpkg-deb -c "$main")
for f in ./usr/bin/dblock ./usr/share/man/man1/dblock.1.gz ./usr/share/bash-completion/completions/dblock \
  ./usr/share/zsh/vendor-completions/_dblock ./usr/share/fish/vendor_completions.d/dblock.fish \
  ./usr/share/doc/dblock/examples/dblock.conf ./usr/share/doc/dblock/examples/crontab \
  ./usr/share/doc/dblock/examples/nightly-report.service ./usr/share/doc/dblock/examples/nightly-report.timer \
  ./usr/share/doc/dblock/copyright; do
  check "dblock ships $f" grep -q " $f\$" <<<"$listing"
done
check "dblock ships /var/lib/dblock, root's, mode 0755" grep -Eq '^drwxr-xr-x root/root .* \./var/lib/dblock/$' <<<"$listing"

# A throwaway root: everything the three packages install.
root=$E2E_TMP/root
for deb in "$main" "$mysql" "$postgres"; do dpkg-deb -x "$deb" "$root"; done
installed=$root/usr/bin/dblock
out=$("$installed" --version); rc=$?
assert_eq "installed dblock --version exits 0" 0 "$rc"
check "--version names $version" grep -q "$version" <<<"$out"
check "--version finds the packaged modules" grep -q "$root/usr/lib/.*/dblock/dblock-postgres.so" <<<"$out"
check "--version names SQLite's version" grep -Eq "SQLite 3\.[0-9]+" <<<"$out"
check "--version names libmariadb's version" grep -Eq "libmariadb [0-9]+\.[0-9]+" <<<"$out"
check "--version names libpq's version" grep -Eq "libpq [0-9]+\.[0-9]+" <<<"$out"
if git -C "$DBLOCK_SOURCE_DIR" rev-parse HEAD >/dev/null 2>&1; then
  check "--version names the git revision it was built from" grep -Eq "\(git [0-9a-f]{12}" <<<"$out"
fi
check "the installed binary is stripped" bash -c '! readelf -S "$1" | grep -q "\.symtab"' _ "$installed"
db=$E2E_TMP/pkg.db
out=$("$installed" -d "sqlite:$db" run "$(key pkg)" -- sh -c 'echo "token $DBLOCK_TOKEN"'); rc=$?
assert_eq "installed dblock runs a job on SQLite" 0 "$rc"
assert_eq "the job got its token" "token 1" "$out"
if [ -n "${DBLOCK_TEST_POSTGRES_DSN:-}" ]; then
  out=$(DBLOCK_DSN=$DBLOCK_TEST_POSTGRES_DSN "$installed" run "$(key pkg-pg)" -- sh -c 'cat /proc/$(ps -o ppid= -p $PPID | tr -d " ")/maps'); rc=$?  # dblock's: the guard's parent
  assert_eq "installed dblock runs a job on PostgreSQL" 0 "$rc"
  check "through the packaged module" grep -q "$root/usr/lib/.*/dblock/dblock-postgres.so" <<<"$out"
else
  skip_or_fail "DBLOCK_TEST_POSTGRES_DSN is not set"
fi
page=$(MANPAGER=cat MANWIDTH=80 man -l "$root/usr/share/man/man1/dblock.1.gz" 2>&1); rc=$?
assert_eq "man -l renders the installed page" 0 "$rc"
check "the page has its NAME section" grep -Eq "dblock +- " <<<"$page"

# The examples' dblock command lines work as written (their commands replaced by true).
n=0
while read -r line; do
  cmdline=$(sed -E 's/^.*(dblock .*) -- .*/\1 -- true/' <<<"$line")
  n=$((n + 1))  # a database each: the examples share key names
  # shellcheck disable=SC2086
  assert_status "example: $cmdline" 0 env DBLOCK_DSN="sqlite:$E2E_TMP/example$n.db" DBLOCK_DSN_FILE= $cmdline
done < <(grep -hE '(ExecStart=|root +)dblock|/usr/bin/dblock' "$DBLOCK_SOURCE_DIR"/examples/crontab \
  "$DBLOCK_SOURCE_DIR"/examples/nightly-report.service)
assert_status "the example config file is valid" 0 env DBLOCK_CONFIG="$DBLOCK_SOURCE_DIR/examples/dblock.conf" \
  DBLOCK_DSN="sqlite:$E2E_TMP/example1.db" dblock status >/dev/null

# A user's own prefix: no root needed, binary stripped, nothing under /var.
prefix=$E2E_TMP/prefix
assert_status "cmake --install --strip into a user prefix" 0 \
  bash -c 'cmake --install "$1" --prefix "$2" --strip >/dev/null' _ "$build" "$prefix"
check "installed bin/dblock" test -x "$prefix/bin/dblock"
check "installed the man page" test -s "$prefix/share/man/man1/dblock.1.gz"
check "nothing outside the prefix's usual directories" bash -c '[ ! -e "$1/var" ]' _ "$prefix"
check "the user-prefix binary finds its modules" eval '"$prefix/bin/dblock" --version | grep -q "$prefix/lib/.*dblock/dblock-mysql.so"'

finish

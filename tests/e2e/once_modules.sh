#!/usr/bin/env bash
# Backend modules (docs/design.md, "Backend modules"): a SQLite run maps no server client
# library; a server DSN loads that backend's module and its client library; a missing or
# foreign module is exit 69 naming the Debian package to install, and SQLite still works.
source "$(dirname "$0")/lib.sh"

client_libs='libpq\.so|libmariadb\.so|libmysqlclient\.so|dblock-(mysql|postgres)\.so'
# The command's parent is the guard; the guard's parent is the dblock that holds the lock.
# The command prints dblock's maps, a marker line, then the guard's.
maps_cmd='cat /proc/$(ps -o ppid= -p $PPID | tr -d " ")/maps; echo "== guard"; cat /proc/$PPID/maps'
dblock_maps() { sed '/^== guard$/,$d' <<<"$1"; }
guard_maps() { sed '1,/^== guard$/d' <<<"$1"; }

assert_status "init" 0 dblock init
out=$(dblock run "$(key maps)" -- sh -c "$maps_cmd"); rc=$?
assert_eq "SQLite run exits 0" 0 "$rc"
check "SQLite run: its maps show dblock itself (the command read the right process)" \
  grep -qF "$dblock_exe" <<<"$(dblock_maps "$out")"
check "SQLite run: the guard's maps were read too" grep -qF "$dblock_exe" <<<"$(guard_maps "$out")"
check "SQLite run maps no server client library or module" bash -c '! grep -Eq "$1" <<<"$2"' _ "$client_libs" "$out"
sqlite_maps=$(dblock_maps "$out")
out=$(dblock --version); rc=$?
assert_eq "--version exits 0" 0 "$rc"
check "--version lists the modules it found" grep -q "dblock-postgres.so" <<<"$out"
check "--version names the client library a module is built with" grep -Eq "built with libpq [0-9]+\.[0-9]+" <<<"$out"
# --version costs what --help does: the dynamic loader (LD_DEBUG=files) opens no module or
# client library. The positive control: the same trace of a postgres DSN (nothing listens on
# port 1, so it fails after loading) shows the module and libpq.
ld_files=$(LD_DEBUG=files "$DBLOCK_BIN" --version 2>&1 >/dev/null)
check "--version loads no module and no client library" bash -c '! grep -Eq "$1" <<<"$2"' _ "$client_libs" "$ld_files"
ld_files=$(LD_DEBUG=files "$DBLOCK_BIN" -d "postgres://u@127.0.0.1:1/db" status 2>&1 >/dev/null)
check "the loader's trace shows a module when one is loaded" grep -Eq "dblock-postgres\.so.*|libpq\.so" <<<"$ld_files"

# A server DSN loads its module (the positive control: the check above can see a module).
for backend in mysql postgres; do
  var=DBLOCK_TEST_${backend^^}_DSN
  [ -n "${!var:-}" ] || skip_or_fail "$var is not set"
  assert_status "$backend init" 0 env DBLOCK_DSN="${!var}" dblock init
  out=$(DBLOCK_DSN=${!var} dblock run "$(key maps-$backend)" -- sh -c "$maps_cmd"); rc=$?
  assert_eq "$backend run exits 0" 0 "$rc"
  check "$backend run maps dblock-$backend.so" grep -q "dblock-$backend\.so" <<<"$(dblock_maps "$out")"
  case $backend in
    mysql) lib='libmariadb\.so|libmysqlclient\.so' ;;
    postgres) lib='libpq\.so' ;;
  esac
  check "$backend run maps its client library" grep -Eq "$lib" <<<"$(dblock_maps "$out")"
  # The guard is forked before the module is loaded, so spawning the command at each handoff
  # copies none of the client libraries' mappings.
  # A module carries the libstdc++ parts it uses when the executable does (the default
  # build): a server run maps no shared libstdc++ either.
  if ! grep -q 'libstdc++\.so' <<<"$sqlite_maps"; then
    check "$backend run maps no shared libstdc++ (the executable has it linked in)" \
      bash -c '! grep -q "libstdc++\.so" <<<"$1"' _ "$(dblock_maps "$out")"
  fi
  check "$backend run: the guard maps dblock" grep -qF "$dblock_exe" <<<"$(guard_maps "$out")"
  check "$backend run: the guard maps no module or client library" \
    bash -c '! grep -Eq "$1" <<<"$2"' _ "$client_libs" "$(guard_maps "$out")"
done

# The executable alone, as on a host with only the SQLite package: server DSNs are exit 69
# with the package to install; SQLite runs as before.
alone=$E2E_TMP/alone
mkdir -p "$alone"
cp "$(readlink -f "$DBLOCK_BIN")" "$alone/dblock"
assert_status "SQLite run without any module" 0 "$alone/dblock" run "$(key alone)" -- true
for backend in mysql postgres; do
  rc=0
  "$alone/dblock" -d "$backend://u@127.0.0.1:1/db" status >"$E2E_TMP/out" 2>&1 || rc=$?
  assert_eq "$backend DSN without its module exits 69" 69 "$rc"
  check "$backend: the message names the package dblock-$backend" grep -q "package dblock-$backend" "$E2E_TMP/out"
  check "--version says $backend is not installed" bash -c \
    "'$alone/dblock' --version | grep -q '^  $backend .*not installed (Debian package dblock-$backend)'"
done

# A file in the module's place that is not this build's module is refused before any of it runs.
cp "$(ldconfig -p | awk '/libsqlite3\.so\.0 /{print $NF; exit}')" "$alone/dblock-postgres.so"
rc=0
"$alone/dblock" -d "postgres://u@127.0.0.1:1/db" status >"$E2E_TMP/out" 2>&1 || rc=$?
assert_eq "a foreign dblock-postgres.so exits 69" 69 "$rc"
check "the message says it is not this dblock's backend" grep -q "is not the postgres backend of this dblock" "$E2E_TMP/out"

finish

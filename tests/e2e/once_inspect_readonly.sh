#!/usr/bin/env bash
# Inspection never changes anything (SQLite): status, history and doctor open the database
# read-only and create no file, directory or table. A missing database is exit 69 "no lock
# database at PATH ..."; a missing directory in a written DSN is 78 naming it; relative paths
# and host parts are refused with 78. A user who may only read a root-owned database inspects it.
source "$(dirname "$0")/lib.sh"

no_db="no lock database at"
hint='(nothing has run here yet, or the DSN is wrong; `dblock init` creates it)'
listing() { (cd "$1" && find . | sort); }

# A typo in the directory: 78 naming the directory, and nothing created.
typo="$E2E_TMP/typo/dir/lcoks.db"
for cmd in "status nightly-report" "history" "doctor"; do
  out=$(dblock --dsn "sqlite:$typo" -q $cmd 2>&1)
  assert_eq "$cmd on a missing directory exits 78" 78 $?
  check "$cmd names the directory" grep -q "the directory $E2E_TMP/typo/dir of the SQLite database $typo does not exist" <<<"$out"
done
for cmd in "run nightly-report -- true" "acquire nightly-report" "init"; do
  out=$(dblock --dsn "sqlite:$typo" -q $cmd 2>&1)
  assert_eq "$cmd with a written DSN in a missing directory exits 78" 78 $?
  check "$cmd names the directory" grep -q "the directory $E2E_TMP/typo/dir " <<<"$out"
done
check "no directory was created for the typo" test ! -e "$E2E_TMP/typo"

# A missing file in an existing directory: 69, the same sentence for every inspection.
mkdir "$E2E_TMP/empty"
missing="$E2E_TMP/empty/dblock.db"
for cmd in "status" "status nightly-report" "history" "history nightly-report"; do
  out=$(dblock --dsn "sqlite:$missing" $cmd 2>&1)
  assert_eq "$cmd on a missing database exits 69" 69 $?
  assert_eq "$cmd says there is no lock database" "dblock: $no_db $missing $hint" "$out"
done
out=$(dblock --dsn "sqlite:$missing" doctor 2>&1)
assert_eq "doctor on a missing database exits 69" 69 $?
check "doctor says so in its connect line" grep -qF "FAIL  connect: $no_db $missing $hint" <<<"$out"
assert_status "status -q KEY on a missing database exits 69, not 1 (free)" 69 dblock --dsn "sqlite:$missing" -q status k
assert_eq "no file was created by status, history or doctor" "." "$(listing "$E2E_TMP/empty")"

# A file without the tables (an empty file): 69 as well, and the file stays as it was.
: >"$missing"
out=$(dblock --dsn "sqlite:$missing" status 2>&1)
assert_eq "status on a file without tables exits 69" 69 $?
assert_eq "and says there is no lock database" "dblock: $no_db $missing $hint" "$out"
assert_status "history on a file without tables exits 69" 69 dblock --dsn "sqlite:$missing" history
out=$(dblock --dsn "sqlite:$missing" doctor 2>&1)
assert_eq "doctor on a file without tables exits 69" 69 $?
check "doctor's tables line says the tables are missing" grep -qF "FAIL  tables: $no_db $missing $hint" <<<"$out"
assert_eq "the empty file is still empty and alone" ".:./dblock.db:0" \
  "$(listing "$E2E_TMP/empty" | tr '\n' ':')$(stat -c %s "$missing")"
rm "$missing"

# Relative paths and host parts: 78 with the forms that work; nothing created where the
# relative path would have pointed.
mkdir "$E2E_TMP/cwd"
for dsn in "sqlite://tmp/x.db" "sqlite:tmp/x.db" "sqlite:x.db" "sqlite://localhost/$E2E_TMP/x.db"; do
  for cmd in "status" "run k -- true"; do
    out=$(cd "$E2E_TMP/cwd" && dblock --dsn "$dsn" $cmd 2>&1)
    assert_eq "$dsn: $cmd exits 78" 78 $?
    check "$dsn: $cmd suggests sqlite:/abs/path or sqlite:///abs/path" grep -qF "sqlite:/abs/path or sqlite:///abs/path" <<<"$out"
  done
done
check "sqlite://tmp/x.db names the host part" bash -c 'dblock --dsn sqlite://tmp/x.db status 2>&1 | grep -qF "no host part ('"'"'tmp'"'"')"'
assert_eq "nothing was created in the working directory" "." "$(listing "$E2E_TMP/cwd")"
assert_status "sqlite:///abs/path still works" 0 dblock --dsn "sqlite://$E2E_TMP/triple.db" -q run k -- true

# The default location: inspection creates nothing there either; run creates its directories.
state="$E2E_TMP/default-state"
mkdir "$state"
as_user() { env -u DBLOCK_DSN XDG_STATE_HOME="$state" "$@"; }
if [ "$(id -u)" -eq 0 ]; then
  # root's default is /var/lib/dblock; a user's is under XDG_STATE_HOME.
  command -v setpriv >/dev/null || fail "setpriv is needed to drop root"
  chmod 0711 "$E2E_TMP"
  chown nobody "$state"
  dblock_bin=$(readlink -f "$DBLOCK_BIN")
  as_user() {
    setpriv --reuid=nobody --regid=nogroup --clear-groups -- env -u DBLOCK_DSN HOME=/nonexistent XDG_CONFIG_HOME=/nonexistent \
      XDG_STATE_HOME="$state" DBLOCK_TABLE_PREFIX="$DBLOCK_TABLE_PREFIX" "$dblock_bin" "${@:2}"
  }
fi
out=$(as_user dblock status 2>&1 </dev/null)
assert_eq "status at the missing default location exits 69" 69 $?
check "and names the default file" grep -qF "$no_db $state/dblock/dblock.db" <<<"$out"
assert_eq "status created nothing at the default location" "." "$(listing "$state")"
assert_status "run creates the default location's directories" 0 as_user dblock -q run k -- true
check "the default database exists now" test -s "$state/dblock/dblock.db"

# A root-owned database in a root-owned directory, inspected by a user who may only read it:
# with the -wal and -shm the last run left, and without them (checkpointed away), which a
# reader who may not write the directory cannot create.
if [ "$(id -u)" -eq 0 ]; then
  ro_dir="$E2E_TMP/ro"
  mkdir "$ro_dir"
  ro_db="$ro_dir/dblock.db"
  assert_status "root runs a job" 0 dblock --dsn "sqlite:$ro_db" run nightly-report -- true
  chmod 0755 "$ro_dir"
  chmod 0644 "$ro_dir"/*
  reader() {
    setpriv --reuid=nobody --regid=nogroup --clear-groups -- env XDG_CONFIG_HOME=/nonexistent \
      DBLOCK_TABLE_PREFIX="$DBLOCK_TABLE_PREFIX" "$dblock_bin" --dsn "sqlite:$ro_db" "$@"
  }
  for files in "with -wal and -shm" "without -wal and -shm"; do
    if [ "$files" = "without -wal and -shm" ]; then
      command -v sqlite3 >/dev/null || fail "sqlite3 (Debian sqlite3) is needed to checkpoint the WAL away"
      sqlite3 "$ro_db" "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
      check "the -wal and -shm are gone" test ! -e "$ro_db-wal" -a ! -e "$ro_db-shm"
    fi
    before=$(listing "$ro_dir")
    out=$(reader status nightly-report 2>&1)
    assert_eq "nobody's status ($files) exits 0" 0 $?
    check "nobody sees the key ($files)" grep -q "^nightly-report .*free" <<<"$out"
    assert_status "nobody's status -q ($files) exits 1" 1 reader -q status nightly-report
    out=$(reader history nightly-report 2>&1)
    assert_eq "nobody's history ($files) exits 0" 0 $?
    check "nobody sees the run ($files)" grep -q "nightly-report .* ok " <<<"$out"
    out=$(reader doctor 2>&1)
    assert_eq "nobody's doctor ($files) exits 78 (not writable), not 69" 78 $?
    echo "$out" | sed 's/^/    | /'
    check "doctor reads the tables ($files)" grep -q "^ok    tables: " <<<"$out"
    check "doctor sees WAL ($files)" grep -q "^ok    journal_mode: " <<<"$out"
    check "doctor says the file is not writable ($files)" grep -q "^FAIL  privileges: .*not writable" <<<"$out"
    assert_eq "nobody's inspection changed no file in the directory ($files)" "$before" "$(listing "$ro_dir")"
  done
fi

finish

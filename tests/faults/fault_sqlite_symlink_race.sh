#!/usr/bin/env bash
# A SQLite database in a sticky world-writable directory (man/dblock.1, DSN): another user
# (nobody) may put names of its own there. Root's dblock must never write through them into a
# file elsewhere: not a planted symlink at the -wal, -shm or -wake, not a hard link to another
# user's file, not another user's plain file (which it could swap for a link at any time), and
# not the path swapped between a plain file and a symlink while dblock checks and opens it (a
# racer does that to two names, one naming an existing root-only database, one a missing file
# in a root-only directory). Each is refused with 78 and nothing in the root-only directory is
# made or changed; root's own database there still works.
# Needs root (it acts as nobody with setpriv) and sqlite3.
source "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root, to act as another user (nobody)"
for tool in setpriv sqlite3 md5sum /usr/bin/python3; do
  command -v "$tool" >/dev/null || skip_or_fail "$tool is needed"
done
chmod 0711 "$E2E_TMP"  # nobody may pass through
sticky=$E2E_TMP/sticky
secret=$E2E_TMP/secret
mkdir -m 1777 "$sticky"
mkdir -m 0700 "$secret"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }

dblock -d "sqlite:$secret/root.db" -q init || fail "init of the root-only database"
sqlite3 "$secret/root.db" "PRAGMA wal_checkpoint(TRUNCATE)" >/dev/null
# The root-only directory's names and the root-only database's content, to compare at the end.
secret_state() { (cd "$secret" && ls -A && sqlite3 root.db .dump | md5sum); }
before=$(secret_state)

# refused NAME DB PATTERN: dblock run on DB exits 78 and says PATTERN.
refused() {
  local st=0
  dblock -d "sqlite:$2" run k -- true 2>"$E2E_TMP/err" || st=$?
  assert_eq "$1: exit 78" 78 "$st"
  grep -qE -- "$3" "$E2E_TMP/err" && pass "$1: names it" || fail "$1: stderr lacks /$3/: $(cat "$E2E_TMP/err")"
}

# --- planted symlinks at the files next to a new database --------------------------------------
for suffix in -wal -shm -wake; do
  db=$sticky/planted$suffix.db
  as_nobody ln -s "$secret/pwned$suffix" "$db$suffix"
  refused "a symlink of nobody's at $suffix" "$db" "$db$suffix is a symbolic link"
  check "the link at $suffix was not followed" test ! -e "$secret/pwned$suffix"
done

# --- another user's plain file, and a hard link to another user's file -------------------------
as_nobody touch "$sticky/theirs.db"
refused "nobody's plain file in the sticky directory" "$sticky/theirs.db" "belongs to nobody"
mkdir -m 0700 "$E2E_TMP/daemon"
install -o daemon -m 0644 /dev/null "$E2E_TMP/daemon/own.db"
ln "$E2E_TMP/daemon/own.db" "$sticky/linked.db"
refused "a hard link to daemon's file" "$sticky/linked.db" "(hard link .* to a file of daemon|has 2 names \(hard links\))"
check "daemon's file was not written" test ! -s "$E2E_TMP/daemon/own.db"

# --- the path swapped between a plain file and a symlink ---------------------------------------
deadline=$(($(date +%s) + 12))
setpriv --reuid=65534 --regid=65534 --clear-groups -- /usr/bin/python3 "$FAULTS_DIR/symlink_racer.py" "$sticky" "$secret" "$deadline" \
  race-a.db=root.db race-b.db=pwned.db >"$E2E_TMP/swaps" &
racer=$!
sleep 0.3
tries=0 others=0 broken=
while [ "$(date +%s)" -lt "$deadline" ] && [ "$tries" -lt 300 ]; do
  for name in race-a race-b; do
    st=0
    dblock -d "sqlite:$sticky/$name.db" run k -- true 2>>"$E2E_TMP/race.err" || st=$?
    tries=$((tries + 1))
    if [ "$st" != 0 ] && [ "$st" != 78 ]; then
      others=$((others + 1))
      echo "    $name: exit $st: $(tail -n 2 "$E2E_TMP/race.err" | tr '\n' ' ')"
    fi
    # root won the name (made the file): its own database worked; free the name to race again
    if [ -O "$sticky/$name.db" ] && [ ! -L "$sticky/$name.db" ]; then rm -f "$sticky/$name.db" "$sticky/$name.db"-*; fi
  done
  [ "$(secret_state)" = "$before" ] || { broken=$tries; break; }
done
kill "$racer" 2>/dev/null
wait "$racer" 2>/dev/null
echo "    $tries runs against $(cat "$E2E_TMP/swaps" 2>/dev/null || echo '?') swaps; first change in the root-only directory: ${broken:-none}"
check "the racer swapped the names" test "$tries" -gt 20
assert_eq "every run under the race exited 0 or 78" 0 "$others"
assert_eq "nothing in the root-only directory was made or changed" "$before" "$(secret_state)"
check "no pwned.db, -wal or -shm" test ! -e "$secret/pwned.db" -a ! -e "$secret/pwned.db-wal" -a ! -e "$secret/pwned.db-shm"

# --- root's own database in the sticky directory -----------------------------------------------
assert_status "root's own database in the sticky directory works" 0 dblock -d "sqlite:$sticky/mine.db" run k -- true
assert_eq "its -wal and -shm are root's" root "$(stat -c %U "$sticky/mine.db-wal" "$sticky/mine.db-shm" | sort -u)"

finish

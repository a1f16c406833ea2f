#!/usr/bin/env bash
# One SQLite database shared by two users through a group (man/dblock.1, SHARING A DATABASE
# FILE): in a setgid directory of the group, a database created under umask 002 is mode 0664
# with the directory's group, and so are its -wal and -shm, whatever the umask of the user who
# runs next; both users run, exclude each other, and inspect. Each way of being denied is exit
# 78 with its own message naming the fix: a database made under umask 022 (file), a directory
# the user may not write (creating the database, or its -wal), a directory the user may not
# enter, a database the user may not read (status). The default location
# stays private (issue 26) even under umask 002.
# Needs root, and sqlite3 (Debian sqlite3) to checkpoint a WAL away: it adds a group of its own
# (groupadd; groupdel when it ends) and acts as the existing users daemon and nobody (setpriv),
# giving them the group only for the processes it starts (setpriv --groups), so /etc/group's
# member lists are never changed.
source "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root, to add a group and act as daemon and nobody"
for tool in setpriv groupadd groupdel stat sqlite3; do
  command -v "$tool" >/dev/null || skip_or_fail "$tool is needed"
done
dblock_bin=$(readlink -f "$DBLOCK_BIN")

group="dblk$$"
groupadd "$group" || { fail "groupadd $group"; finish; }
trap 'groupdel "$group"; e2e_cleanup' EXIT
gid=$(getent group "$group" | cut -d: -f3)
chmod 0711 "$E2E_TMP"  # the two users may pass through, not list or write

# as USER in|out UMASK ARGS...: dblock as USER, in the group or not, under UMASK, with only PATH
# and the table prefix in its environment.
as() {
  local user=$1 member=$2 mask=$3 groups=(--clear-groups)
  shift 3
  [ "$member" = in ] && groups=(--groups="$gid")
  setpriv --reuid="$user" --regid="$(id -g "$user")" "${groups[@]}" -- \
    env -i PATH=/usr/bin:/bin DBLOCK_TABLE_PREFIX="$DBLOCK_TABLE_PREFIX" \
    bash -c 'umask "$1"; shift; exec "$@"' _ "$mask" "$dblock_bin" "$@"
}
# modes FILE...: "mode owner group" of each, one line each.
modes() { stat -c '%a %U %G' "$@"; }
# expect_error NAME LINE USER in|out UMASK ARGS...: exit 78 and LINE as the whole of stderr.
expect_error() {
  local name=$1 line=$2
  shift 2
  expect_line "$name" 78 "$line" as "$@"
}

# --- the shared directory: root:group, setgid, group-writable ----------------------------------
shared=$E2E_TMP/shared
mkdir "$shared"
chgrp "$group" "$shared"
chmod 2775 "$shared"
db=$shared/jobs.db

out=$(as daemon in 002 -d "sqlite:$db" init 2>&1)
assert_eq "daemon, umask 002: init exits 0" 0 $?
for file in "$db" "$db-wal" "$db-shm"; do
  assert_eq "$(basename "$file") is group-writable, daemon's, in the directory's group" \
    "664 daemon $group" "$(modes "$file")"
done

# nobody, in the group, with cron's umask 022, runs a job on the same file.
out=$(as nobody in 022 -d "sqlite:$db" run shared-job -- id -un 2>&1)
assert_eq "nobody, in the group: run exits 0" 0 $?
assert_eq "and the job ran as nobody" nobody "$out"
out=$(as daemon in 022 -d "sqlite:$db" run shared-job -- id -un 2>&1)
assert_eq "daemon: run exits 0" 0 $?
assert_eq "and the job ran as daemon" daemon "$out"
assert_eq "the files kept their mode and group" \
  "664 daemon $group|664 daemon $group|664 daemon $group" "$(modes "$db" "$db-wal" "$db-shm" | paste -sd'|')"

# They exclude each other: daemon holds the key, nobody is refused (75), then takes it.
token=$(as daemon in 022 -d "sqlite:$db" acquire held-key --ttl 1m)
assert_eq "daemon acquires a key" 0 $?
assert_status "nobody cannot take daemon's key (75)" 75 as nobody in 022 -d "sqlite:$db" acquire held-key --ttl 1m
out=$(as nobody in 022 -d "sqlite:$db" status held-key 2>&1)
assert_eq "nobody's status exits 0" 0 $?
check "and shows the key held" grep -q "^held-key .*held" <<<"$out"
assert_status "daemon releases it" 0 as daemon in 022 -d "sqlite:$db" release held-key --token "$token"
as nobody in 022 -d "sqlite:$db" acquire held-key --ttl 1m >/dev/null
assert_eq "nobody takes it now" 0 $?

# --- a database created under umask 022: the file is the problem -------------------------------
db22=$shared/umask022.db
assert_status "daemon, umask 022: init" 0 as daemon in 022 -d "sqlite:$db22" -q init
assert_eq "the database is 0644" "644 daemon $group" "$(modes "$db22")"
expect_error "nobody, in the group, on a 0644 database" \
  "dblock: 'k': cannot write the SQLite database $db22: user nobody may not write $db22 (mode 0644, owner daemon, group $group): Permission denied; fix, as daemon or root: chmod g+rw $db22 $db22-wal $db22-shm" \
  nobody in 022 -d "sqlite:$db22" run k -- true
# The fix as the message words it.
setpriv --reuid=daemon --regid=daemon --clear-groups -- chmod g+rw "$db22" "$db22-wal" "$db22-shm"
out=$(as nobody in 022 -d "sqlite:$db22" run k -- id -un 2>&1)
assert_eq "after the fix nobody runs (exit 0)" 0 $?
assert_eq "as nobody" nobody "$out"

# --- nobody outside the group -------------------------------------------------------------------
expect_error "nobody, not in the group, on the shared database" \
  "dblock: 'k': cannot write the SQLite database $db: user nobody may not write $db (mode 0664, owner daemon, group $group): Permission denied; fix, as root: add nobody to group $group (usermod -aG $group nobody), or give $db $db-wal $db-shm a group nobody is in and chmod g+rw (dblock(1), SHARING A DATABASE FILE)" \
  nobody out 002 -d "sqlite:$db" run k -- true

# --- a directory the user may not write: creating is the problem --------------------------------
closed=$E2E_TMP/closed
mkdir "$closed"
chgrp "$group" "$closed"
chmod 2755 "$closed"
expect_error "nobody, in the group, creating a database in a 2755 directory" \
  "dblock: 'k': cannot create the SQLite database $closed/new.db: user nobody may not write the directory $closed (mode 2755, owner root, group $group): Permission denied; fix, as root: chmod g+ws $closed; or let a user who may write there create it (umask 002; dblock init)" \
  nobody in 002 -d "sqlite:$closed/new.db" run k -- true
check "no database was made there" test ! -e "$closed/new.db"
# A database there that the group may write, whose -wal and -shm sqlite3 removed: SQLite must
# make them again, in a directory nobody may not write.
bash -c 'umask 002; exec "$@"' _ "$dblock_bin" -d "sqlite:$closed/old.db" -q init
sqlite3 "$closed/old.db" "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
check "sqlite3 removed the -wal and -shm" test ! -e "$closed/old.db-wal" -a ! -e "$closed/old.db-shm"
expect_error "nobody, in the group, on a database whose -wal must be made in a 2755 directory" \
  "dblock: 'k': cannot create $closed/old.db-wal, which the SQLite database $closed/old.db needs: user nobody may not write the directory $closed (mode 2755, owner root, group $group): Permission denied; fix, as root: chmod g+ws $closed" \
  nobody in 002 -d "sqlite:$closed/old.db" run k -- true

# --- a directory the user may not enter ----------------------------------------------------------
private=$E2E_TMP/private
mkdir "$private"
chgrp "$group" "$private"
chmod 2770 "$private"
assert_status "daemon, in the group, makes a database in a 2770 directory" 0 \
  as daemon in 002 -d "sqlite:$private/jobs.db" -q init
enter_line="user nobody may not enter the directory $private (mode 2770, owner root, group $group): Permission denied; fix, as root: add nobody to group $group (usermod -aG $group nobody), or give $private a group nobody is in and chmod g+x (dblock(1), SHARING A DATABASE FILE)"
expect_error "nobody, not in the group, behind a 2770 directory: run" \
  "dblock: 'k': cannot reach the SQLite database $private/jobs.db: $enter_line" \
  nobody out 022 -d "sqlite:$private/jobs.db" run k -- true
expect_error "and status, which only reads" \
  "dblock: cannot reach the SQLite database $private/jobs.db: $enter_line" \
  nobody out 022 -d "sqlite:$private/jobs.db" status
assert_status "in the group, nobody gets in" 0 as nobody in 022 -d "sqlite:$private/jobs.db" run k -- true

# --- reading a database the group may read but not this user -----------------------------------
chmod 0660 "$db22" "$db22-wal" "$db22-shm"
expect_error "nobody, not in the group, inspecting a 0660 database" \
  "dblock: cannot read the SQLite database $db22: user nobody may not read $db22 (mode 0660, owner daemon, group $group): Permission denied; fix, as root: add nobody to group $group (usermod -aG $group nobody), or give $db22 a group nobody is in and chmod g+r (dblock(1), SHARING A DATABASE FILE)" \
  nobody out 022 -d "sqlite:$db22" status

# --- the default location stays private, whatever the umask -------------------------------------
home=$E2E_TMP/home
mkdir -m 0755 "$home"
chown daemon: "$home"
assert_status "daemon, umask 002, HOME=$home: run" 0 \
  setpriv --reuid=daemon --regid=daemon --clear-groups -- env -i PATH=/usr/bin:/bin HOME="$home" \
  bash -c 'umask 002; exec "$@"' _ "$dblock_bin" run private-job -- true
default_db=$home/.local/state/dblock/dblock.db
assert_eq "the default database is not group-writable" "644 daemon daemon" "$(modes "$default_db")"
assert_status "and a second run accepts it as private" 0 \
  setpriv --reuid=daemon --regid=daemon --clear-groups -- env -i PATH=/usr/bin:/bin HOME="$home" \
  bash -c 'umask 002; exec "$@"' _ "$dblock_bin" run private-job -- true

finish

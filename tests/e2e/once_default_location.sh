#!/usr/bin/env bash
# The default database of a user is private (man/dblock.1, FILES): a user without a home gets no
# default (never one under /tmp), and the default location is refused (exit 78, also by status
# and doctor) when a part of it, from the file up to the state directory, is owned by another
# user or writable by others, as ssh(1) refuses such a ~/.ssh. A DSN that names the same file
# is taken as written. Whatever the DSN, a symlink another user made in a sticky world-writable
# directory is not followed. Needs root, to act as two other users: daemon is the victim,
# nobody the other user.
source "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root to act as daemon and nobody"
command -v setpriv >/dev/null || skip_or_fail "setpriv is needed to drop root"
dblock_bin=$(readlink -f "$DBLOCK_BIN")
chmod 0711 "$E2E_TMP"  # the two users may pass through, not list or write

# as USER VAR=VALUE... -- ARGS...: dblock as USER with only the environment given.
as() {
  local user=$1
  shift
  local env=()
  while [ "$1" != -- ]; do env+=("$1"); shift; done
  shift
  setpriv --reuid="$user" --regid="$(id -g "$user")" --clear-groups -- \
    env -i PATH=/usr/bin:/bin DBLOCK_TABLE_PREFIX="$DBLOCK_TABLE_PREFIX" "${env[@]}" "$dblock_bin" "$@"
}
# mkdir_as USER MODE DIR...
mkdir_as() {
  local user=$1 mode=$2
  shift 2
  setpriv --reuid="$user" --regid="$(id -g "$user")" --clear-groups -- mkdir -p -m "$mode" "$@"
}

# --- a user without HOME --------------------------------------------------------------------
# In a private /tmp (a mount namespace), so nothing the old default made there can linger. The
# binary's directory is bound at /mnt first: a checkout under /tmp would vanish with it.
if out=$(unshare --mount --propagation private bash -c '
    mount --bind "$(dirname "$1")" /mnt || exit 99
    mount -t tmpfs tmpfs /tmp || exit 99
    setpriv --reuid=nobody --regid=nogroup --clear-groups -- \
      env -i PATH=/usr/bin:/bin "/mnt/$(basename "$1")" run no-home -- true 2>&1
    echo "exit $?"
    find /tmp -mindepth 1 | sed "s/^/made /"' _ "$dblock_bin"); then
  echo "$out" | sed 's/^/    | /'
  check "nobody without HOME: exit 78" grep -qx "exit 78" <<<"$out"
  check "nobody without HOME: told to give a DSN" grep -q "give a DSN" <<<"$out"
  check "nobody without HOME: nothing made under /tmp" bash -c '! grep -q "^made " <<<"$1"' _ "$out"
else
  fail "a private /tmp (unshare --mount) is needed for the no-HOME case"
fi

# --- a home another user could write into ---------------------------------------------------
# shared: a /tmp of our own (root, 1777); nobody makes the victim's directories there first.
shared=$E2E_TMP/shared
mkdir -m 1777 "$shared"
mkdir_as nobody 0777 "$shared/.local" "$shared/.local/state" "$shared/.local/state/dblock"
chmod 0777 "$shared/.local" "$shared/.local/state" "$shared/.local/state/dblock"
out=$(as daemon HOME="$shared" -- run shared -- true 2>&1)
assert_eq "HOME whose directories nobody made: run refuses with 78" 78 $?
check "and names the directory and its owner" grep -q "$shared/.local/state/dblock is owned by uid $(id -u nobody)" <<<"$out"
check "and says how to use it anyway" grep -q "give a DSN" <<<"$out"
out=$(as daemon HOME="$shared" -- status 2>&1)
assert_eq "status refuses it too" 78 $?
out=$(as daemon HOME="$shared" -- doctor 2>&1)
assert_eq "doctor reports it (78)" 78 $?
check "in a FAIL line naming the owner" grep -q "^FAIL  connect: .*owned by uid $(id -u nobody)" <<<"$out"
assert_status "a DSN naming the same file is taken as written" 0 \
  as daemon HOME="$shared" -- --dsn "sqlite:$shared/.local/state/dblock/dblock.db" run shared -- true

# A world-writable home is refused before anything is made in it.
open_home=$E2E_TMP/open-home
mkdir -m 1777 "$open_home"
out=$(as daemon HOME="$open_home" -- run open-home -- true 2>&1)
assert_eq "a world-writable HOME: 78" 78 $?
check "naming its mode" grep -q "$open_home may be written by others (mode 1777)" <<<"$out"
check "nothing made in it" test ! -e "$open_home/.local"

# The victim's own directories, but one of them writable by its group.
home=$E2E_TMP/home
mkdir -m 0755 "$home"
chown daemon: "$home"
assert_status "a private home: run" 0 as daemon HOME="$home" -- run private -- true
assert_status "a private home: doctor" 0 as daemon HOME="$home" -- doctor
assert_status "XDG_STATE_HOME is the state directory when set" 0 \
  as daemon HOME=/nonexistent XDG_STATE_HOME="$home/.local/state" -- status private
chmod g+w "$home/.local/state/dblock"
out=$(as daemon HOME="$home" -- run private -- true 2>&1)
assert_eq "a group-writable directory on the path: 78" 78 $?
check "naming its mode" grep -q "dblock may be written by others (mode 0775)" <<<"$out"
chmod g-w "$home/.local/state/dblock"

# --- a symlink in a sticky world-writable directory -----------------------------------------
# nobody plants $shared/jobs.db -> a file of daemon's; daemon's DSN names $shared/jobs.db.
setpriv --reuid=nobody --regid=nogroup --clear-groups -- ln -s "$home/clobbered.db" "$shared/jobs.db"
out=$(as daemon HOME="$home" -- --dsn "sqlite:$shared/jobs.db" run planted -- true 2>&1)
assert_eq "nobody's symlink in a sticky world-writable directory: 78" 78 $?
check "saying it is not followed" grep -q "jobs.db is a symlink that uid $(id -u nobody) made .* not followed" <<<"$out"
check "the file it points to is not made" test ! -e "$home/clobbered.db"
setpriv --reuid=daemon --regid=daemon --clear-groups -- ln -s "$home/.local/state/dblock/dblock.db" "$shared/own.db"
assert_status "the user's own symlink there is followed" 0 \
  as daemon HOME="$home" -- --dsn "sqlite:$shared/own.db" run own -- true

finish

#!/usr/bin/env bash
# Config and DSN files are trusted the way ssh trusts authorized_keys (dblock(1), FILES and
# --dsn-file; issue 46 item 7): one that a user other than root and the one running dblock
# owns, one its group or others may write, or one in a directory another user may change, is
# refused with exit 78 naming the file and the fix, and its DSN is never used. Root's own
# 0644 file and a user's own 0600 file work.
# Needs root: it acts as the existing user nobody (setpriv) and gives files to it (chown).
source "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root, to give files to nobody and act as nobody"
command -v setpriv >/dev/null || skip_or_fail "setpriv is needed"
dblock_bin=$(readlink -f "$DBLOCK_BIN")
chmod 0711 "$E2E_TMP"
unset DBLOCK_DSN
err=$E2E_TMP/err
k=$(key k)

# The DSN a hostile file names: a database that must never be created.
bait=$E2E_TMP/bait.db
conf=$E2E_TMP/c.conf
printf 'dsn = "sqlite:%s"\n' "$bait" >"$conf"
dsnfile=$E2E_TMP/dsn
echo "sqlite:$bait" >"$dsnfile"
never_used() { check "$1: its DSN was not used" test ! -e "$bait"; }

# expect_refused NAME LINE ARGS...: exit 78, LINE on stderr, no database made.
expect_refused() {
  local name=$1 line=$2
  shift 2
  expect_line "$name" 78 "$line" "$@"
  never_used "$name"
}

chown 65534 "$conf"
chmod 644 "$conf"
expect_refused "root, another user's config file" \
  "dblock: config file $conf belongs to uid 65534 (nobody), not to root: refused, as its owner decides what dblock does (as root: chown root $conf)" \
  "$dblock_bin" --config "$conf" run "$k" -- true
expect_refused "root, another user's config file by DBLOCK_CONFIG" \
  "dblock: config file $conf belongs to uid 65534 (nobody), not to root: refused, as its owner decides what dblock does (as root: chown root $conf)" \
  env DBLOCK_CONFIG="$conf" "$dblock_bin" run "$k" -- true
mkdir -p "$E2E_TMP/config/dblock"
cp -p "$conf" "$E2E_TMP/config/dblock/dblock.conf"
expect_refused "root, another user's file at the default config path" \
  "dblock: config file $E2E_TMP/config/dblock/dblock.conf belongs to uid 65534 (nobody), not to root: refused, as its owner decides what dblock does (as root: chown root $E2E_TMP/config/dblock/dblock.conf)" \
  env XDG_CONFIG_HOME="$E2E_TMP/config" "$dblock_bin" run "$k" -- true
rm -r "$E2E_TMP/config"

chown 0 "$conf"
chmod 666 "$conf"
expect_refused "root's config file, mode 0666" \
  "dblock: config file $conf has mode 0666: users other than its owner may change it: refused (chmod go-w $conf)" \
  "$dblock_bin" --config "$conf" run "$k" -- true
chmod 664 "$conf"
expect_refused "root's config file, mode 0664" \
  "dblock: config file $conf has mode 0664: users other than its owner may change it: refused (chmod go-w $conf)" \
  "$dblock_bin" --config "$conf" run "$k" -- true

chmod 666 "$dsnfile"
expect_refused "DSN file 0666 (no password in it)" \
  "dblock: '$k': DSN file $dsnfile has mode 0666: users other than its owner may change it: refused (chmod go-w $dsnfile)" \
  "$dblock_bin" --dsn-file "$dsnfile" run "$k" -- true
expect_refused "DSN file 0666 by DBLOCK_DSN_FILE" \
  "dblock: '$k': DSN file $dsnfile has mode 0666: users other than its owner may change it: refused (chmod go-w $dsnfile)" \
  env DBLOCK_DSN_FILE="$dsnfile" "$dblock_bin" run "$k" -- true
chmod 644 "$dsnfile"
chown 65534 "$dsnfile"
expect_refused "root, another user's DSN file" \
  "dblock: '$k': DSN file $dsnfile belongs to uid 65534 (nobody), not to root: refused, as its owner decides what dblock does (as root: chown root $dsnfile)" \
  "$dblock_bin" --dsn-file "$dsnfile" run "$k" -- true
printf 'dsn-file = "%s"\n' "$dsnfile" >"$E2E_TMP/via.conf"
expect_refused "root, another user's DSN file named by a config file" \
  "dblock: '$k': DSN file $dsnfile belongs to uid 65534 (nobody), not to root: refused, as its owner decides what dblock does (as root: chown root $dsnfile)" \
  "$dblock_bin" --config "$E2E_TMP/via.conf" run "$k" -- true
chown 0 "$dsnfile"

# A directory others may write (and that is not sticky): the file could be swapped.
mkdir "$E2E_TMP/open"
chmod 777 "$E2E_TMP/open"
cp -p "$conf" "$E2E_TMP/open/c.conf"
chmod 644 "$E2E_TMP/open/c.conf"
expect_refused "root's config file 0644 in a directory of mode 0777" \
  "dblock: config file $E2E_TMP/open/c.conf: its directory $E2E_TMP/open has mode 0777: users other than its owner may put another file in its place: refused (chmod go-w $E2E_TMP/open, or +t)" \
  "$dblock_bin" --config "$E2E_TMP/open/c.conf" run "$k" -- true

# /dev/null (mode 0666) is no config at all.
assert_status "DBLOCK_CONFIG=/dev/null" 0 env DBLOCK_CONFIG=/dev/null "$dblock_bin" schema --dialect sqlite >/dev/null

# What is trusted works: root's own 0644 config and DSN file...
good=$E2E_TMP/good.db
chmod 644 "$conf" "$dsnfile"
printf 'dsn = "sqlite:%s"\n' "$good" >"$conf"
assert_status "root's config file 0644" 0 "$dblock_bin" --config "$conf" run "$k" -- true
echo "sqlite:$good" >"$dsnfile"
assert_status "root's DSN file 0644" 0 "$dblock_bin" --dsn-file "$dsnfile" run "$k" -- true
# ...and a user's own 0600 files, in a directory of theirs; and root's file read by the user.
mine=$E2E_TMP/nobody
mkdir "$mine" && chown 65534:65534 "$mine" && chmod 700 "$mine"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- env -i PATH=/usr/bin:/bin "$@"; }
as_nobody sh -c "umask 077; printf 'dsn = \"sqlite:$mine/own.db\"\n' >'$mine/c.conf'; echo 'sqlite:$mine/own.db' >'$mine/dsn'"
assert_status "nobody's own config file 0600" 0 as_nobody "$dblock_bin" --config "$mine/c.conf" run "$k" -- true
assert_status "nobody's own DSN file 0600" 0 as_nobody "$dblock_bin" --dsn-file "$mine/dsn" run "$k" -- true
check "nobody's database was made" test -e "$mine/own.db"
chmod 755 "$mine"
echo "sqlite:$mine/own.db" >"$E2E_TMP/root.dsn"
assert_status "nobody reads root's DSN file 0644" 0 as_nobody "$dblock_bin" --dsn-file "$E2E_TMP/root.dsn" run "$k" -- true
# The user's file read by another user (root owns nothing here, nobody does): refused for root.
expect_refused "root, nobody's 0600 DSN file" \
  "dblock: '$k': DSN file $mine/dsn belongs to uid 65534 (nobody), not to root: refused, as its owner decides what dblock does (as root: chown root $mine/dsn)" \
  "$dblock_bin" --dsn-file "$mine/dsn" run "$k" -- true

finish

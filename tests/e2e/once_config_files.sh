#!/usr/bin/env bash
# Which config file is read (dblock(1), FILES): one file, never a layer of them, the first of
# /etc/dblock/dblock.conf and ~/.config/dblock/dblock.conf that exists (unless --config or
# DBLOCK_CONFIG names one). `doctor` names the file read and, as a WARN, every default file
# that exists and was not read, and why; -v says the same on any subcommand.
# The machine's /etc is never written nor read for it: each dblock runs in a mount namespace
# of its own (unshare -m, which needs root) over an overlay of /etc, where /etc/dblock is
# either absent or holds the test's system file.
source "$(dirname "$0")/lib.sh"

if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null; then
  skip_or_fail "needs root and unshare, for an /etc of its own"
fi
home=$E2E_TMP/home
user_conf=$home/.config/dblock/dblock.conf
mkdir -p "$(dirname "$user_conf")"
printf 'dsn = "sqlite:%s"\n' "$E2E_TMP/user.db" >"$user_conf"
printf 'dsn = "sqlite:%s"\n' "$E2E_TMP/other.db" >"$E2E_TMP/other.conf"

# in_ns none|system ARGS...: ARGS in a namespace whose /etc has no dblock/ (none) or the test's
# /etc/dblock/dblock.conf naming system.db (system).
cat >"$E2E_TMP/in-namespace.sh" <<'EOF'
set -e
tmp=$1 etc=$2
shift 2
rm -rf "$tmp/etc-upper" "$tmp/etc-work"
mkdir "$tmp/etc-upper" "$tmp/etc-work"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$tmp/etc-upper,workdir=$tmp/etc-work" /etc
rm -rf /etc/dblock
if [ "$etc" = system ]; then
  mkdir /etc/dblock
  printf 'dsn = "sqlite:%s"\n' "$tmp/system.db" >/etc/dblock/dblock.conf
  chmod 644 /etc/dblock/dblock.conf
fi
exec "$@"
EOF
in_ns() { unshare -m --propagation private bash "$E2E_TMP/in-namespace.sh" "$E2E_TMP" "$@"; }
# as_user none|system ARGS...: dblock ARGS with this HOME, no XDG_CONFIG_HOME, no DSN in the environment.
as_user() {
  local etc=$1
  shift
  in_ns "$etc" env -u DBLOCK_DSN -u XDG_CONFIG_HOME -u DBLOCK_CONFIG HOME="$home" "$@"
}
check "an /etc of the test's own" in_ns system test -f /etc/dblock/dblock.conf
check "the machine's /etc is not changed" eval '! test -e /etc/dblock/dblock.conf || ! grep -qF "$E2E_TMP" /etc/dblock/dblock.conf'

out=$(as_user none env HOME="$E2E_TMP/nohome" "$DBLOCK_BIN" doctor 2>&1 | grep config:)
assert_eq "no config file" \
  "ok    config: no config file read (none of /etc/dblock/dblock.conf, $E2E_TMP/nohome/.config/dblock/dblock.conf exists)" "$out"

out=$(as_user none "$DBLOCK_BIN" doctor 2>&1 | grep config:)
assert_eq "the user's file alone is read" "ok    config: read $user_conf" "$out"

out=$(as_user none "$DBLOCK_BIN" --config "$E2E_TMP/other.conf" doctor 2>&1 | grep config:)
assert_eq "--config: the user's file is named as not read" \
  "WARN  config: read $E2E_TMP/other.conf (--config); not read: $user_conf: --config names $E2E_TMP/other.conf" "$out"
out=$(as_user none env DBLOCK_CONFIG="$E2E_TMP/other.conf" "$DBLOCK_BIN" -v status 2>&1)
check "DBLOCK_CONFIG, -v: the file read" grep -qxF "dblock: config file $E2E_TMP/other.conf (DBLOCK_CONFIG)" <<<"$out"
check "DBLOCK_CONFIG, -v: the user's file not read" \
  grep -qxF "dblock: config file $user_conf is not read: DBLOCK_CONFIG names $E2E_TMP/other.conf" <<<"$out"

# The system's file hides the user's: said by doctor and -v, and the system's DSN is the one used.
assert_status "init of the system file's database" 0 as_user system "$DBLOCK_BIN" -q init
out=$(as_user system "$DBLOCK_BIN" -v doctor 2>&1)
sed 's/^/    | /' <<<"$out"
check "doctor warns that the user's file is not read, and why" grep -qxF \
  "WARN  config: read /etc/dblock/dblock.conf; not read: $user_conf: only the first config file that exists is read, /etc/dblock/dblock.conf; files are not layered (dblock(1), FILES)" <<<"$out"
check "-v names the file read" grep -qxF "dblock: config file /etc/dblock/dblock.conf" <<<"$out"
check "-v names the file not read" grep -qF "dblock: config file $user_conf is not read: only the first" <<<"$out"
check "the system's database is the one used" grep -qF "sqlite:$E2E_TMP/system.db" <<<"$out"
assert_eq "doctor exits 0 (a warning)" 0 "$(as_user system "$DBLOCK_BIN" doctor >/dev/null 2>&1; echo $?)"
finish

#!/usr/bin/env bash
# Which config file is read (dblock(1), FILES): one file, never a layer of them, the first of
# /etc/dblock/dblock.conf and ~/.config/dblock/dblock.conf that exists (unless --config or
# DBLOCK_CONFIG names one). `doctor` names the file read and, as a WARN, every default file
# that exists and was not read, and why; -v says the same on any subcommand.
# /etc is never written: the system file lives in an overlay of /etc in a mount namespace of
# the test's own (unshare -m), which needs root.
source "$(dirname "$0")/lib.sh"

home=$E2E_TMP/home
user_conf=$home/.config/dblock/dblock.conf
mkdir -p "$(dirname "$user_conf")"
printf 'dsn = "sqlite:%s"\n' "$E2E_TMP/user.db" >"$user_conf"
printf 'dsn = "sqlite:%s"\n' "$E2E_TMP/other.db" >"$E2E_TMP/other.conf"
# as_user ARGS...: dblock with this HOME, no XDG_CONFIG_HOME, no DSN in the environment.
as_user() { env -u DBLOCK_DSN -u XDG_CONFIG_HOME -u DBLOCK_CONFIG HOME="$home" "$@"; }

out=$(as_user env HOME="$E2E_TMP/nohome" dblock doctor 2>&1 | grep config:)
assert_eq "no config file" "ok    config: no config file read" "$out"

out=$(as_user dblock doctor 2>&1 | grep config:)
assert_eq "the user's file alone is read" "ok    config: read $user_conf" "$out"

out=$(as_user dblock --config "$E2E_TMP/other.conf" doctor 2>&1 | grep config:)
assert_eq "--config: the user's file is named as not read" \
  "WARN  config: read $E2E_TMP/other.conf (--config); not read: $user_conf: --config names $E2E_TMP/other.conf" "$out"
out=$(as_user env DBLOCK_CONFIG="$E2E_TMP/other.conf" dblock -v status 2>&1)
check "DBLOCK_CONFIG, -v: the file read" grep -qxF "dblock: config file $E2E_TMP/other.conf (DBLOCK_CONFIG)" <<<"$out"
check "DBLOCK_CONFIG, -v: the user's file not read" \
  grep -qxF "dblock: config file $user_conf is not read: DBLOCK_CONFIG names $E2E_TMP/other.conf" <<<"$out"

# The system's file hides the user's: said by doctor and -v, and the system's DSN is the one used.
if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null; then
  skip_or_fail "needs root and unshare, for an /etc of its own"
fi
mkdir -p "$E2E_TMP/etc-upper" "$E2E_TMP/etc-work"
cat >"$E2E_TMP/in-namespace.sh" <<'EOF'
set -e
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/etc-upper,workdir=$1/etc-work" /etc
mkdir -p /etc/dblock
printf 'dsn = "sqlite:%s"\n' "$1/system.db" >/etc/dblock/dblock.conf
chmod 644 /etc/dblock/dblock.conf
shift
"$@"
EOF
in_ns() { unshare -m --propagation private bash "$E2E_TMP/in-namespace.sh" "$E2E_TMP" "$@"; }
check "an /etc of the test's own" in_ns true
assert_status "init of the system file's database" 0 in_ns env -u DBLOCK_DSN -u XDG_CONFIG_HOME -u DBLOCK_CONFIG HOME="$home" "$DBLOCK_BIN" -q init
out=$(in_ns env -u DBLOCK_DSN -u XDG_CONFIG_HOME -u DBLOCK_CONFIG HOME="$home" "$DBLOCK_BIN" -v doctor 2>&1)
sed 's/^/    | /' <<<"$out"
check "doctor warns that the user's file is not read, and why" grep -qxF \
  "WARN  config: read /etc/dblock/dblock.conf; not read: $user_conf: only the first config file that exists is read, /etc/dblock/dblock.conf; files are not layered (dblock(1), FILES)" <<<"$out"
check "-v names the file read" grep -qxF "dblock: config file /etc/dblock/dblock.conf" <<<"$out"
check "-v names the file not read" grep -qF "dblock: config file $user_conf is not read: only the first" <<<"$out"
check "the system's database is the one used" grep -qF "sqlite:$E2E_TMP/system.db" <<<"$out"
assert_eq "doctor exits 0 (a warning)" 0 "$(in_ns env -u DBLOCK_DSN -u XDG_CONFIG_HOME -u DBLOCK_CONFIG HOME="$home" "$DBLOCK_BIN" doctor >/dev/null 2>&1; echo $?)"
finish

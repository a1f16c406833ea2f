#!/usr/bin/env bash
# Passwords with '/', '#', '?', a space, '@', '+' and '=' (dblock(1), DSN; issue 46 item 8):
# never on stderr, in a syslog line or in /proc/PID/cmdline, neither whole nor any piece of 3
# bytes or more between '/', '#', '?', ' ' and '@', for postgres:// and mysql://, given by -d,
# DBLOCK_DSN and --dsn-file. A raw '/' or '@' in the user info (base64 passwords hold '/') is
# misread by clients (libpq took "Ab+" for the port): such a DSN is refused (78) before any
# connect, its message naming the fix; one with '#', '?' or a space only is used. -d with a
# password warns that ps saw it. Needs no server: port 1 on 127.0.0.1 is closed.
source "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || skip_or_fail "python3 is not installed"
unset DBLOCK_DSN

# A syslog socket that keeps each datagram as a line.
cat >"$E2E_TMP/syslog.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "ab", buffering=0) as f:
    while True:
        f.write(s.recv(65536) + b"\n")
PY
# blocked.py CMDLINE ERR ARGV...: runs ARGV with stderr a pipe filled to the brim, so that
# dblock stops at its first message, after it has scrubbed its arguments; saves its
# /proc/PID/cmdline then (once it shows a mask, or after 5 s), drains the pipe into ERR and
# exits with dblock's status.
cat >"$E2E_TMP/blocked.py" <<'PY'
import fcntl, os, subprocess, sys, time
cmdline_out, err_out, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
r, w = os.pipe()
fcntl.fcntl(w, fcntl.F_SETFL, os.O_NONBLOCK)
filler = 0
try:
    while True:
        filler += os.write(w, b"x" * 4096)
except BlockingIOError:
    pass
fcntl.fcntl(w, fcntl.F_SETFL, 0)
p = subprocess.Popen(argv, stderr=w, stdout=subprocess.DEVNULL)
os.close(w)
cmdline = b""
deadline = time.time() + 5
while time.time() < deadline:
    try:
        cmdline = open("/proc/%d/cmdline" % p.pid, "rb").read()
    except OSError:
        break
    if b"****" in cmdline:
        break
    time.sleep(0.05)
open(cmdline_out, "wb").write(cmdline.replace(b"\0", b" "))
data = b""
while True:
    chunk = os.read(r, 65536)
    if not chunk:
        break
    data += chunk
open(err_out, "wb").write(data[filler:])
sys.exit(p.wait())
PY
start_bg syslog_pid python3 "$E2E_TMP/syslog.py" "$E2E_TMP/syslog.sock" "$E2E_TMP/syslog"
check "the syslog socket is up" wait_for 10 test -S "$E2E_TMP/syslog.sock"
export DBLOCK_SYSLOG_SOCKET=$E2E_TMP/syslog.sock

# shows_none NAME PASSWORD FILE...: neither PASSWORD nor a piece of it of 3 bytes or more
# between '/', '#', '?', ' ' and '@' appears in the files.
shows_none() {
  local name=$1 password=$2 piece shown=
  shift 2
  local pieces=("$password")
  IFS=$'\n' read -r -d '' -a more < <(printf '%s' "$password" | tr '/#? @' '\n\n\n\n\n' && printf '\0')
  for piece in "${more[@]}"; do [ "${#piece}" -ge 3 ] && pieces+=("$piece"); done
  for piece in "${pieces[@]}"; do
    if grep -qF -- "$piece" "$@"; then shown+=" '$piece'"; fi
  done
  if [ -n "$shown" ]; then fail "$name shows$shown: $(grep -hF -- "${pieces[0]:0:3}" "$@" | head -3)"; else pass "$name hides the password"; fi
}

# A raw '/' or '@' in the user info: refused before any connect. Then '#', '?', a space, '+'
# and '=' alone: used (and the closed port refuses the connect).
refused=('Ab+/cd=Xy9' 'Kq7/Wm2#Pz5?Lr8 Tn4@Vb6+Hs3=' 'Jd5@Fg8' 'Uy6?Io3/Pe4')
accepted=('Mn4#Bv7?Cx2 Zl9+Rq5=')
for scheme in postgres mysql; do
  for password in "${refused[@]}" "${accepted[@]}"; do
    dsn="$scheme://dblock:$password@127.0.0.1:1/dbx"
    want=69
    for r in "${refused[@]}"; do [ "$r" = "$password" ] && want=78; done
    name="$scheme '$password'"

    : >"$E2E_TMP/syslog"
    status=0
    python3 "$E2E_TMP/blocked.py" "$E2E_TMP/cmdline" "$E2E_TMP/err" \
      "$DBLOCK_BIN" -d "$dsn" --connect-timeout 2s --log syslog status || status=$?
    assert_eq "$name by -d: exit status" "$want" "$status"
    check "$name by -d: the error reached syslog" wait_for 10 grep -q "$scheme://" "$E2E_TMP/syslog"
    shows_none "$name by -d: stderr" "$password" "$E2E_TMP/err"
    shows_none "$name by -d: syslog" "$password" "$E2E_TMP/syslog"
    shows_none "$name by -d: /proc/PID/cmdline" "$password" "$E2E_TMP/cmdline"
    check "$name by -d: cmdline still names the scheme" grep -q -- "-d $scheme://" "$E2E_TMP/cmdline"
    check "$name by -d: the warning says ps saw a password" grep -q "visible to ps" "$E2E_TMP/err"
    if [ "$want" = 78 ]; then
      check "$name: the message says to percent-encode" grep -q "percent-encode '/' as %2F and '@' as %40" "$E2E_TMP/err"
    fi

    assert_status "$name by DBLOCK_DSN: exit status" "$want" \
      env DBLOCK_DSN="$dsn" "$DBLOCK_BIN" --connect-timeout 2s status 2>"$E2E_TMP/err"
    shows_none "$name by DBLOCK_DSN: stderr" "$password" "$E2E_TMP/err"

    printf '%s\n' "$dsn" >"$E2E_TMP/dsn"
    chmod 600 "$E2E_TMP/dsn"
    assert_status "$name by --dsn-file: exit status" "$want" \
      "$DBLOCK_BIN" --dsn-file "$E2E_TMP/dsn" --connect-timeout 2s status 2>"$E2E_TMP/err"
    shows_none "$name by --dsn-file: stderr" "$password" "$E2E_TMP/err"
    check "$name by --dsn-file: no ps warning" bash -c "! grep -q 'visible to ps' '$E2E_TMP/err'"
    chmod 644 "$E2E_TMP/dsn"
    "$DBLOCK_BIN" --dsn-file "$E2E_TMP/dsn" --connect-timeout 2s status 2>"$E2E_TMP/err"
    check "$name by --dsn-file 0644: warned as a password" grep -q "holds a password and is readable by other users" "$E2E_TMP/err"
    shows_none "$name by --dsn-file 0644: stderr" "$password" "$E2E_TMP/err"
  done
done

# Percent-encoded, the same password is read whole: the connect is tried (and refused).
assert_status "postgres, percent-encoded '/' and '@'" 69 \
  "$DBLOCK_BIN" -d 'postgres://dblock:Ab+%2Fcd=Xy9%40@127.0.0.1:1/dbx' --connect-timeout 2s status 2>"$E2E_TMP/err"
check "postgres, percent-encoded: dblock tried to connect" grep -q "cannot connect to postgres://dblock:\*\*\*\*@127.0.0.1:1/dbx" "$E2E_TMP/err"
assert_status "mysql, percent-encoded '/' and '@'" 69 \
  "$DBLOCK_BIN" -d 'mysql://dblock:Ab+%2Fcd=Xy9%40@127.0.0.1:1/dbx' --connect-timeout 2s status 2>"$E2E_TMP/err"

finish

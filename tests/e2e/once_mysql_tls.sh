#!/usr/bin/env bash
# dblock over TLS on MariaDB: ssl-mode=VERIFY_IDENTITY, ssl-ca, and a user REQUIRE X509 with
# ssl-cert/ssl-key; what is checked: tests/e2e/tls_checks.sh.
export DBLOCK_TEST_TLS=1
source "$(dirname "$0")/../faults/lib.sh"
PLAIN_DSN=$E2E_SQL_DSN
# 127.1 is 127.0.0.1 under a name the certificate lacks (localhost would mean the Unix socket).
OTHER_NAME=127.1
# A server that offers no TLS: a greeting without CLIENT_SSL, then OK to every packet (the
# login, the init command), so a client that settles for plain TCP gets through the login.
python3 - "$E2E_TMP/no_tls.port" <<'PY' &
import socket, struct, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(8)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
caps = 0x0200 | 0x8000 | 0x80000  # PROTOCOL_41, SECURE_CONNECTION, PLUGIN_AUTH; no SSL (0x800)
body = (b"\x0a" + b"10.11.0-MariaDB-no-tls\0" + struct.pack("<I", 7) + b"abcdefgh\0" +
        struct.pack("<HBHH", caps & 0xFFFF, 45, 2, caps >> 16) + b"\x15" + b"\0" * 10 +
        b"ijklmnopqrst\0" + b"mysql_native_password\0")
while True:
    c, _ = s.accept()
    c.sendall(struct.pack("<I", len(body))[:3] + b"\0" + body)
    c.settimeout(5)
    try:
        while (data := c.recv(4096)):
            c.sendall(b"\x07\0\0" + bytes([(data[3] + 1) & 0xFF]) + b"\0\0\0\x02\0\0\0")
    except OSError:
        pass
    c.close()
PY
remember_pid $!
wait_for 10 test -s "$E2E_TMP/no_tls.port" || fail "the server without TLS did not start"
NO_TLS_DSN="${E2E_SQL_DSN%@*}@127.0.0.1:$(cat "$E2E_TMP/no_tls.port")/dblock_test?ssl-mode=VERIFY_IDENTITY&ssl-ca=${DBLOCK_TEST_TLS_DIR:-}/ca.crt"
source "$(dirname "$0")/tls_checks.sh"
# ssl-mode=REQUIRED without a CA: Connector/C alone would log in over plain TCP.
refused "ssl-mode=REQUIRED, a server without TLS" "${NO_TLS_DSN%%\?*}?ssl-mode=REQUIRED" 'does not offer TLS'
finish

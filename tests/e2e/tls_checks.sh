# The body of once_mysql_tls.sh and once_postgres_tls.sh (sourced after lib.sh and
# tests/faults/lib.sh with DBLOCK_TEST_TLS=1): dblock over TLS with a verified server
# certificate and a client certificate (scripts/test-servers.sh), on one server.
#  1. every strategy: run, status; lease: acquire, renew, release;
#  2. doctor's tls line: encrypted, protocol, cipher, verified against a CA and the host name;
#     and over plain TCP on loopback: not encrypted, nothing crosses a network;
#  3. the server ends the holder's session: the run exits 76 as fast over TLS as over plain
#     TCP (both figures printed);
#  4. kill -9 of dblock over TLS: tests/faults/fault_kill9_tree.sh in a session strategy;
#  5. a wrong CA, an expired CA certificate, a certificate for another name, a server without
#     TLS: exit 78 at once, a message naming the cause, never the password.
# PLAIN_DSN (the same server without TLS, set by the caller), NO_TLS_DSN (a server that offers
# no TLS, with TLS required) and OTHER_NAME (a host name of 127.0.0.1 the certificate lacks).

tls_dir=${DBLOCK_TEST_TLS_DIR:-}
[ -n "$tls_dir" ] && [ -r "$tls_dir/ca.key" ] || skip_or_fail "DBLOCK_TEST_TLS_DIR (scripts/test-servers.sh) names no CA"
tls_dsn=$DBLOCK_DSN
password=${tls_dsn#*://}
password=${password%%@*}
password=${password#*:}
strategies=(lease advisory for-update txn-insert)

# 1. Every strategy over TLS.
for s in "${strategies[@]}"; do
  k=$(key "run-$s")
  out=$(dblock -s "$s" run "$k" -- sh -c 'echo "ran $DBLOCK_TOKEN"' 2>&1)
  check "$s: run over TLS ($out)" test "${out%% *}" = ran
  assert_eq "$s: status shows the run" 0 "$(status_field "$k" last_exit_code)"
done
k=$(key lease)
token=$(dblock -s lease acquire "$k" --ttl 30s --owner tls-test)
check "lease: acquire over TLS (token '$token')" test -n "$token"
check "lease: status shows it held" is_held "$k"
check "lease: renew over TLS" dblock -s lease renew "$k" --ttl 30s --owner tls-test
check "lease: release over TLS" dblock -s lease release "$k" --owner tls-test
check "lease: free afterwards" is_free "$k"

# 2. doctor's tls line.
line=$(dblock doctor 2>&1 | grep '^[A-Za-z]* *tls: ')
check "doctor over TLS: '$line'" grep -Eq "^ok +tls: encrypted \\(TLSv1\\.[23], [A-Z0-9_-]+\\) to 127\\.0\\.0\\.1; the server's certificate was verified against a CA and the host name\$" <<<"$line"
line=$(DBLOCK_DSN=$PLAIN_DSN dblock doctor 2>&1 | grep '^[A-Za-z]* *tls: ')
check "doctor over plain TCP: '$line'" grep -Eq "^ok +tls: not encrypted; 127\\.0\\.0\\.1 is on this host" <<<"$line"

# 3. The holder's session ended by the server: TLS and plain TCP side by side. --ttl 6s: a
# heartbeat every 2 s.
# lost_ms DSN STRATEGY: ms from the session's end to the run's exit 76 (or "rc=N").
lost_ms() {
  local k start rc
  k=$(key "lost-$2-$RANDOM")
  rm -f "$E2E_TMP/started"
  DBLOCK_DSN=$1 start_bg holder dblock -s "$2" run "$k" --ttl 6s --kill-after 0.5s -- \
    sh -c 'touch "$0"; sleep 60' "$E2E_TMP/started" 2>"$E2E_TMP/lost.err"
  wait_for 10 test -e "$E2E_TMP/started" && wait_for 10 is_held "$k" || { echo "never held"; return; }
  start=$(now_ms)
  kill_holder_session "$k" >/dev/null || { echo "no session to kill"; return; }
  wait_exit rc "$holder" 20
  [ "$rc" = 76 ] && echo $(($(now_ms) - start)) || echo "rc=$rc $(head -c 200 "$E2E_TMP/lost.err")"
}
for s in advisory for-update txn-insert; do
  tls_ms=$(lost_ms "$tls_dsn" "$s")
  plain_ms=$(lost_ms "$PLAIN_DSN" "$s")
  echo "      $s: the run noticed its session's end in $tls_ms ms over TLS, $plain_ms ms over plain TCP"
  check "$s: exit 76 over TLS ($tls_ms)" test "$tls_ms" -ge 0
  check "$s: exit 76 over plain TCP ($plain_ms)" test "$plain_ms" -ge 0
  # One heartbeat (2 s) plus the 0.5 s grace, and slack for a loaded machine.
  [ "$tls_ms" -ge 0 ] 2>/dev/null && assert_between "$s: over TLS within 5 s" 0 5000 "$tls_ms"
  [ "$tls_ms" -ge 0 ] 2>/dev/null && [ "$plain_ms" -ge 0 ] 2>/dev/null &&
    assert_between "$s: over TLS no slower than plain TCP + 1 s" 0 $((plain_ms + 1000)) "$tls_ms"
done

# 4. kill -9 of dblock over TLS never frees the lock before the job's tree is dead.
for s in advisory txn-insert; do
  check "$s: fault_kill9_tree over TLS" env DBLOCK_TEST_TLS=1 DBLOCK_TEST_STRATEGY="$s" \
    bash "$DBLOCK_SOURCE_DIR/tests/faults/fault_kill9_tree.sh"
done

# 5. Refused at once: exit 78, the cause named, the password never shown.
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$E2E_TMP/other-ca.key" 2>/dev/null
openssl req -x509 -new -key "$E2E_TMP/other-ca.key" -subj "/CN=dblock test CA" -days 30 \
  -out "$E2E_TMP/other-ca.crt" 2>/dev/null
# The test CA's own key and name, valid for one day in 2020: the chain ends in an expired
# certificate.
# libfaketime preloaded, not the faketime wrapper, whose semaphore two tests at once can collide on.
libfaketime=$(ls /usr/lib/*/faketime/libfaketime.so.1 /usr/lib/faketime/libfaketime.so.1 2>/dev/null | head -n 1)
LD_PRELOAD=$libfaketime FAKETIME='@2020-01-01 00:00:00' openssl req -x509 -new -key "$tls_dir/ca.key" \
  -subj "/CN=dblock test CA" -days 1 -out "$E2E_TMP/expired-ca.crt" 2>"$E2E_TMP/ca.err"
check "the test CAs were made ($(cat "$E2E_TMP/ca.err"))" test -s "$E2E_TMP/other-ca.crt" -a -s "$E2E_TMP/expired-ca.crt"
# refused NAME DSN CAUSE_REGEX
refused() {
  local start rc took
  start=$(now_ms)
  DBLOCK_DSN=$2 dblock -s advisory run "$(key refused)" -w 30 -- true >"$E2E_TMP/refused.out" 2>&1
  rc=$?
  took=$(($(now_ms) - start))
  assert_eq "$1: exit 78 ($(head -c 400 "$E2E_TMP/refused.out"))" 78 "$rc"
  assert_between "$1: at once, not after -w 30 (took $took ms)" 0 3000 "$took"
  check "$1: the message names the cause" grep -Eq "$3" "$E2E_TMP/refused.out"
  check "$1: the password is not shown" bash -c "! grep -qF -- '$password' '$E2E_TMP/refused.out'"
}
ca_param=$(grep -oE '(ssl-ca|sslrootcert)=[^&]*' <<<"$tls_dsn")
refused "a CA that did not sign the server's certificate" "${tls_dsn/$ca_param/${ca_param%%=*}=$E2E_TMP/other-ca.crt}" \
  'certificate|self-signed'
refused "an expired CA certificate" "${tls_dsn/$ca_param/${ca_param%%=*}=$E2E_TMP/expired-ca.crt}" \
  'certificate'
refused "a certificate for another name ($OTHER_NAME)" "${tls_dsn/@127.0.0.1:/@$OTHER_NAME:}" \
  'certificate.*(match|Validation)|Validation|does not match'
refused "a server without TLS" "$NO_TLS_DSN" 'SSL|TLS'

#!/usr/bin/env bash
# A libpq multi-host DSN (a failover pair, dblock(1) DSN) whose first host never answers (a
# silent network, not a refusal): dblock goes on to the next host within the connect timeout,
# as libpq's own blocking connect would, instead of failing on the first.
source "$(dirname "$0")/../faults/lib.sh"

port=$(dsn_port "$DBLOCK_TEST_POSTGRES_DSN") || { fail "the test DSN is not 127.0.0.1:PORT"; finish; }
proxy_start "$port"
check "the first host goes silent" proxy_freeze
pair=${DBLOCK_TEST_POSTGRES_DSN/127.0.0.1:$port/127.0.0.1:$PROXY_PORT,127.0.0.1:$port}
k=$(key multi-host)
start=$(now_ms)
DBLOCK_DSN=$pair dblock --connect-timeout 6s run "$k" -- true 2>"$E2E_TMP/err"
rc=$?
took=$(($(now_ms) - start))
assert_eq "a run over the pair whose first host is silent: exit 0" 0 "$rc"
[ "$rc" = 0 ] || sed 's/^/      /' "$E2E_TMP/err"
# Its share of the 6 s is 3 s, then the second host answers at once (generous upper bound).
assert_between "it moved on after the first host's share of the timeout (ms)" 2500 6000 "$took"
assert_eq "the run is recorded" 1 "$(history_field "$k" runs.#)"
# Both hosts silent: the whole connect timeout, then 69 (not a hang; without the retry that a
# server which took the connection and never answered gets, as a busy one would).
proxy_start "$port"
second=$PROXY_PORT
check "the second host goes silent too" proxy_freeze "$PROXY_PID"
both=${DBLOCK_TEST_POSTGRES_DSN/127.0.0.1:$port/127.0.0.1:$second,127.0.0.1:$second}
start=$(now_ms)
DBLOCK_DSN=$both dblock --connect-timeout 4s run --overload-retry 0 "$k" -- true 2>/dev/null
assert_eq "every host silent: exit 69" 69 $?
assert_between "within the connect timeout (ms)" 3000 6500 $(($(now_ms) - start))
finish

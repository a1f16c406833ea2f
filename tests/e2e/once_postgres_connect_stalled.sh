#!/usr/bin/env bash
# A client held off the CPU past its connect timeout while the server answered (a host busy
# with every cron job of the same minute, the start storm of docs/performance.md): the connect
# looks at what arrived before it calls the server silent. strace holds dblock's first
# connect() for longer than the connect timeout; the loopback handshake completes meanwhile, so
# the server was reached: that is the storm's "turned away" (retried for --overload-retry), not
# a server that is down (69). A server that is down still exits 69 at once (once_messages.sh).
source "$(dirname "$0")/lib.sh"

command -v strace >/dev/null || skip_or_fail "strace is needed to hold a connect (scripts/install-deps.sh)"
strace -f -o /dev/null true 2>/dev/null || skip_or_fail "strace cannot trace here (ptrace not permitted)"

k=$(key stalled)
start=$(now_ms)
strace -f -qq -o /dev/null -e trace=connect -e inject=connect:delay_exit=3s:when=1 \
  "$DBLOCK_BIN" --connect-timeout 2s run --overload-retry 15s "$k" -- true 2>"$E2E_TMP/err"
rc=$?
assert_eq "a run whose connect() returned after its connect timeout, the server up: exit 0" 0 "$rc"
[ "$rc" = 0 ] || sed 's/^/      /' "$E2E_TMP/err"
assert_between "it ran soon after the held connect (ms)" 2900 9000 $(($(now_ms) - start))
assert_eq "the run is recorded" 1 "$(history_field "$k" runs.#)"
finish

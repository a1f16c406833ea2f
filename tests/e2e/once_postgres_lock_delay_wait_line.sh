#!/usr/bin/env bash
# A waiter on a terminal through a failover (issue 50): `run -w` says once that it waits,
# naming the holder, and, when the holder lets go and the failover lock-delay holds it back,
# once more that it now waits for the lock-delay and until when (dblock(1), Failover lock-delay),
# then nothing until the command runs: without -v it was silent for the whole delay. Driven in
# a real terminal, tmux, whose screen is read with capture-pane. The failover is simulated as in
# test_failover_delay.sh: the record is made to name another server.
source "$(dirname "$0")/lib.sh"

command -v tmux >/dev/null 2>&1 || skip_or_fail "tmux is not installed (scripts/install-deps.sh installs it)"

# A tmux server of this script's own (its socket in the temp dir), gone with the script.
tmux_socket=$E2E_TMP/tmux
tm() { tmux -S "$tmux_socket" -f /dev/null "$@"; }
trap 'tm kill-server 2>/dev/null; e2e_cleanup' EXIT
screen() { tm capture-pane -p -J -t waiter -S - | sed 's/[[:space:]]*$//' | grep .; }
on_screen() { screen | grep -q "$1"; }

record=${DBLOCK_TABLE_PREFIX}locks
k=$(key lock-delay-line)
assert_status "a first run records the incarnation and a longest TTL of 3 s" 0 dblock run --ttl 3s "$k" -- true
start_bg holder dblock run --ttl 3s --owner web1:4711 "$k" -- sleep 3
check "web1:4711 holds the key" wait_for 10 is_held "$k"

# The waiter on the terminal: the environment (DSN, table prefix, PATH) is the tmux server's,
# which it took from this script.
tm new-session -d -s waiter -x 400 -y 50 \
  "dblock run -w 30 '$k' -- echo the-command-ran; echo \"exit \$?\"; sleep 600"
check "the waiter says it waits, naming the holder" wait_for 10 on_screen "waiting for '$k', held by web1:4711"
check "a simulated failover" server_sql "UPDATE \"$record\" SET owner = 'the-old-primary' WHERE name = E'\\x01failover'"
check "the waiter's command runs once the lock-delay is over" wait_for 20 on_screen "^exit "
screen >"$E2E_TMP/screen"
sed 's/^/    screen: /' "$E2E_TMP/screen"

check "first line: waiting, held by the holder, its expiry" \
  grep -Eq "^dblock: waiting for '$k', held by web1:4711 since [0-9]{2}:[0-9]{2}:[0-9]{2} \(lease, expires in [0-9]+s\)$" \
  <(sed -n 1p "$E2E_TMP/screen")
delay_line="^dblock: still waiting for '$k', now for the failover lock-delay \(failover from the-old-primary to [^)]+\) until [0-9]{2}:[0-9]{2}:[0-9]{2} \(in [0-9]+s\)$"
assert_eq "once the holder let go: one line, the lock-delay and until when" 1 "$(grep -Ec "$delay_line" "$E2E_TMP/screen")"
check "that line is the second" grep -Eq "$delay_line" <(sed -n 2p "$E2E_TMP/screen")
check "then the command ran" grep -qx "the-command-ran" <(sed -n 3p "$E2E_TMP/screen")
check "and the run exits 0" grep -qx "exit 0" <(sed -n 4p "$E2E_TMP/screen")
assert_eq "nothing else on the screen" 4 "$(grep -c . "$E2E_TMP/screen")"
wait_exit holder_status "$holder" 10
assert_eq "the holder, whose grant survived the failover, completed" 0 "$holder_status"
finish

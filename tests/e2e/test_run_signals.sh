#!/usr/bin/env bash
# run: signals reach the command, a signal aborts a wait, kill -9 of dblock kills the command.
source "$(dirname "$0")/lib.sh"

# SIGTERM to dblock is passed to the command; dblock exits with the command's status.
k=$(key sigterm)
start_bg runner dblock run "$k" -- sh -c "trap 'echo got-term >\"$E2E_TMP/term\"; exit 3' TERM; echo \$\$ >\"$E2E_TMP/cmd1\"; while :; do sleep 0.1; done"
check "command started" wait_for 10 test -s "$E2E_TMP/cmd1"
kill -TERM $runner
wait_exit rc $runner
assert_eq "dblock exits with the command's status after SIGTERM" 3 "$rc"
check "the command saw SIGTERM" grep -q got-term "$E2E_TMP/term"
check "the lock is free afterwards" wait_for 5 is_free "$k"

# SIGINT to dblock: the command dies of it, dblock exits 130.
# A script's background commands start with SIGINT ignored, and dblock keeps an ignored
# signal ignored (as nohup needs): env gives this one its default back.
start_bg runner env --default-signal=INT dblock run "$k" -- sh -c "echo \$\$ >\"$E2E_TMP/cmd2\"; exec sleep 30"
check "second command started" wait_for 10 test -s "$E2E_TMP/cmd2"
kill -INT $runner
wait_exit rc $runner
assert_eq "SIGINT: 128+2" 130 "$rc"
check "the sleeping command is gone" bash -c "! kill -0 $(cat "$E2E_TMP/cmd2") 2>/dev/null"

# SIGTERM to dblock: the lock waits for the whole job, not only its command. The command (a
# shell) dies of the signal at once; its child spends half a second in its own TERM handler;
# a waiter starts only once that child has ended.
k=$(key sigterm-tree)
cat >"$E2E_TMP/tree-child.sh" <<'SH'
trap 'sleep 0.5; date +%s%N >"$1.end"; exit 0' TERM
echo $$ >"$1.pid"
sleep 30 &
wait
SH
start_bg runner dblock run "$k" -- sh -c 'bash "$0" "$1"; :' "$E2E_TMP/tree-child.sh" "$E2E_TMP/tree"
check "the command's child started" wait_for 10 test -s "$E2E_TMP/tree.pid"
check "its lock is held" wait_for 10 is_held "$k"
start_bg waiter dblock run "$k" -w 60 -- sh -c 'date +%s%N >"$0"' "$E2E_TMP/tree-waiter"
sleep 1
kill -TERM $runner
wait_exit rc $runner
assert_eq "dblock exits with the command's status (SIGTERM: 143)" 143 "$rc"
wait_exit rc $waiter
assert_eq "the waiter ran" 0 "$rc"
check "the child ended its handler" test -s "$E2E_TMP/tree.end"
ended=$(cat "$E2E_TMP/tree.end" 2>/dev/null || echo 0)
started=$(cat "$E2E_TMP/tree-waiter" 2>/dev/null || echo 0)
assert_between "the waiter started after the child's end (ms)" 0 30000 $(((started - ended) / 1000000))

# SIGUSR1 asks a job for something, not to stop: a command that then ends by itself is taken at
# its word, and what it left running (here a child that ignores SIGUSR1) is neither waited for
# nor killed.
k=$(key usr1-tree)
start_bg runner dblock run "$k" -- sh -c 'trap : USR1; (trap "" USR1; exec sleep 5) & echo $! >"$0.bg"
  while [ ! -e "$0.go" ]; do sleep 0.05; done' "$E2E_TMP/usr1"
check "the command's child started" wait_for 10 test -s "$E2E_TMP/usr1.bg"
kill -USR1 $runner
sleep 0.3
touch "$E2E_TMP/usr1.go"
wait_exit rc $runner
assert_eq "SIGUSR1, then the command ends by itself: exit 0" 0 "$rc"
check "the child it left running was not killed" kill -0 "$(cat "$E2E_TMP/usr1.bg")"
kill "$(cat "$E2E_TMP/usr1.bg")" 2>/dev/null

# dblock's own stop (--max-hold, --kill-after 0) kills the whole job, including a part that
# reaches the guard only once the guard has killed its parent. The shape of a dblock inside the
# command: its guard left the command's process group (the orphan here, in a session of its
# own), and its job is in another group again (the grandchild), so the one kill of the guard's
# children (the orphan) leaves the grandchild running, reparented to the guard, until it ends
# by itself. dblock must kill it at once, not wait for it (or give up) with the lock held.
k=$(key maxhold-orphans)
cat >"$E2E_TMP/orphan.sh" <<'SH'
setsid sh -c 'echo $$ >"$0.grandchild"; exec sleep 30' "$1" &
echo $$ >"$1.orphan"
wait
SH
start_bg runner dblock run --max-hold 1s --kill-after 0 "$k" -- sh -c 'setsid sh "$0" "$1" & sleep 30' \
  "$E2E_TMP/orphan.sh" "$E2E_TMP/orphan"
check "the grandchild started" wait_for 10 test -s "$E2E_TMP/orphan.grandchild"
t0=$(now_ms)
wait_exit rc $runner
assert_eq "--max-hold: 124" 124 "$rc"
assert_between "dblock exits soon after --max-hold, not after the grandchild's 30 s (ms)" 0 4000 $(($(now_ms) - t0))
grandchild=$(cat "$E2E_TMP/orphan.grandchild")
check "the grandchild is gone when dblock exits" bash -c "! kill -0 $grandchild 2>/dev/null"
kill -KILL "$grandchild" 2>/dev/null

# A signal while waiting aborts the wait promptly with 128+N.
k=$(key wait-signal)
start_bg holder dblock run "$k" -- sleep 30
check "holder takes the lock" wait_for 10 is_held "$k"
start_bg waiter dblock run "$k" -w 60 -- touch "$E2E_TMP/waiter-ran"
sleep 1
start=$(now_ms)
kill -TERM $waiter
wait_exit rc $waiter
assert_eq "SIGTERM while waiting: 143" 143 "$rc"
assert_between "the wait ended promptly" 0 2000 $(($(now_ms) - start))
check "the waiter ran nothing" test ! -e "$E2E_TMP/waiter-ran"
kill -TERM $holder
wait $holder

# kill -9 of dblock: the command dies with it (PDEATHSIG); the lock frees after the TTL
# (session strategies: at once, the connection is gone).
k=$(key kill9)
start_bg runner dblock run "$k" --ttl 4 --kill-after 0.3 -- sh -c "echo \$\$ >\"$E2E_TMP/cmd3\"; exec sleep 60"
check "third command started" wait_for 10 test -s "$E2E_TMP/cmd3"
cmd=$(cat "$E2E_TMP/cmd3")
killed_at=$(now_ms)
kill -KILL $runner
wait $runner 2>/dev/null
check "the command died with dblock" wait_for 5 bash -c "! kill -0 $cmd 2>/dev/null"
if is_session_strategy; then
  check "session lock free at once" wait_for 5 dblock run "$k" -- true
else
  assert_status "lease still held right after the crash" 75 dblock run "$k" -- true
  check "lease frees after the TTL" wait_for 15 dblock run "$k" -- true
  assert_between "freed no sooner than the TTL" 3000 15000 $(($(now_ms) - killed_at))
fi

finish

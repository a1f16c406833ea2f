#!/usr/bin/env bash
# --slots N (dblock(1), SEMAPHORES): at most N holders at once, DBLOCK_SLOT, tokens that
# strictly increase per key across slots, one slot count per key, status slot by slot, a waiter
# taking the slot that frees, renew/release of one slot, history under the key.
source "$(dirname "$0")/lib.sh"

s=$DBLOCK_STRATEGY
dblock init >/dev/null 2>&1 || true

# Three racers on two slots: exactly two run, each in its own slot; the third exits 75. The two
# hold until the test lets them go ($E2E_TMP/let-go, at most 60 s), not for a fixed time: on a
# loaded machine the checks below may take longer than any sleep.
k=$(key race)
race 3 "$E2E_TMP/status" dblock run --slots 2 "$k" -- sh -c "echo \"\$DBLOCK_SLOT \$DBLOCK_TOKEN\" >>'$E2E_TMP/ran'
  i=0; while [ ! -e '$E2E_TMP/let-go' ] && [ \$i -lt 1200 ]; do sleep 0.05; i=\$((i + 1)); done"
check "$s: two slots taken" wait_for 15 bash -c "[ \$(wc -l <'$E2E_TMP/ran' 2>/dev/null || echo 0) -ge 2 ]"
check "$s: the third racer exits 75" wait_for 15 bash -c "grep -qx 75 '$E2E_TMP'/status.* 2>/dev/null"
assert_eq "$s: slots 0 and 1 were given out" "0 1" "$(cut -d' ' -f1 "$E2E_TMP/ran" | sort | xargs)"
assert_eq "$s: two distinct tokens" 2 "$(cut -d' ' -f2 "$E2E_TMP/ran" | sort -u | wc -l | tr -d ' ')"

# While both are held: status shows both slots, another count and a plain lock are refused (78).
assert_eq "$s: status -J has one object per slot" "2 0 1 2 2 held held" \
  "$(dblock status "$k" --json | json_field locks.# locks.0.slot locks.1.slot locks.0.slots locks.1.slots locks.0.state locks.1.state)"
assert_eq "$s: both slots show their holder's token" "$(cut -d' ' -f2 "$E2E_TMP/ran" | sort -n | xargs)" \
  "$(dblock status "$k" --json | json_field 'locks.*.token' | tr ' ' '\n' | sort -n | xargs)"
assert_eq "$s: the table's SLOT column" "0/2 1/2" "$(dblock status "$k" -o SLOT -n | xargs)"
check "$s: status -q: a held semaphore is held" dblock status -q "$k"
check "$s: metrics: the semaphore is one held key" grep -qx "dblock_lock_held{key=\"$k\"} 1" <<<"$(dblock metrics "$k")"
check "$s: metrics: no slot row shows as a key of its own" test -z "$(dblock metrics | grep -F "$k" | grep -v "key=\"$k\"")"
err=$(dblock run --slots 3 "$k" -- touch "$E2E_TMP/wrong-count" 2>&1)
rc=$?
assert_eq "$s: --slots 3 on a 2-slot semaphore exits 78" 78 "$rc"
check "$s: ... naming the recorded count" grep -q "semaphore of 2 slots" <<<"$err"
assert_status "$s: a plain lock of a semaphore's key exits 78" 78 dblock run "$k" -- touch "$E2E_TMP/wrong-count"
check "$s: neither refused command ran" test ! -e "$E2E_TMP/wrong-count"

# A waiter takes the first slot that frees: the holders are let go 1 s after it starts.
start=$(now_ms)
dblock run --slots 2 -w 60 "$k" -- sh -c 'echo "$DBLOCK_SLOT $DBLOCK_TOKEN"' >"$E2E_TMP/waiter" &
waiter=$!
sleep 1
touch "$E2E_TMP/let-go"
rc=0
wait "$waiter" || rc=$?
out=$(cat "$E2E_TMP/waiter")
assert_eq "$s: the waiter ran" 0 "$rc"
max_token=$(cut -d' ' -f2 "$E2E_TMP/ran" | sort -n | tail -n 1)
check "$s: the waiter's token ($out) is greater than both holders' ($max_token)" test "${out#* }" -gt "$max_token"
check "$s: the waiter got a slot of 0..1" grep -qE '^[01] ' <<<"$out"
assert_between "$s: it waited for a holder to end" 1000 60000 $(($(now_ms) - start))
wait_for 15 bash -c "[ \$(ls '$E2E_TMP'/status.* | wc -l) -ge 3 ]"
assert_eq "$s: the holders exited 0" "0 0 75" "$(cat "$E2E_TMP"/status.* | sort -n | xargs)"

# History: every slot's run under the key, tokens as given.
assert_eq "$s: history lists the three runs under the key" 3 "$(history_field "$k" runs.#)"
assert_eq "$s: ... with the tokens the commands saw" \
  "$( (cut -d' ' -f2 "$E2E_TMP/ran"; echo "${out#* }") | sort -n | xargs)" \
  "$(history_field "$k" 'runs.*.token' | tr ' ' '\n' | sort -n | xargs)"

# Idle: the next holder's count is recorded.
assert_eq "$s: status -q: an idle semaphore is free" 1 "$(dblock status -q "$k"; echo $?)"
check "$s: metrics: an idle semaphore is not held" grep -qx "dblock_lock_held{key=\"$k\"} 0" <<<"$(dblock metrics "$k")"
check "$s: check: the semaphore's runs are the key's" grep -q "^DBLOCK OK - $k: last success" <<<"$(dblock check "$k" --max-age 1h)"
assert_status "$s: once idle, --slots 3 is taken" 0 dblock run --slots 3 "$k" -- true
assert_eq "$s: status now shows three slots" 3 "$(dblock status "$k" --json | json_field locks.#)"

# DBLOCK_SLOT is only for semaphores: a plain run does not pass an outer one on.
k2=$(key plain)
assert_eq "$s: a plain run unsets DBLOCK_SLOT" "unset" \
  "$(DBLOCK_SLOT=7 dblock run "$k2" -- sh -c 'echo ${DBLOCK_SLOT-unset}')"
assert_status "$s: --slots with --min-interval is a usage error" 64 dblock run --slots 2 --min-interval 1m "$k2" -- true
assert_status "$s: --slots 0 is a usage error" 64 dblock run --slots 0 "$k2" -- true
assert_status "$s: --slots with --table-format shedlock is a configuration error" 78 \
  dblock --table-format shedlock run --slots 2 "$k2" -- true
long=$(printf 'k%.0s' $(seq 253))
assert_status "$s: a key too long for its slot rows is a usage error" 64 dblock run --slots 100 "$long" -- true

# A free plain key becomes a semaphore; its tokens go on.
plain_token=$(dblock run "$k2" -- sh -c 'echo $DBLOCK_TOKEN')
sem_token=$(dblock run --slots 2 "$k2" -- sh -c 'echo $DBLOCK_TOKEN')
check "$s: the semaphore's token ($sem_token) follows the plain lock's ($plain_token)" test "$sem_token" -gt "$plain_token"

# acquire / renew / release of one slot (lease only: the others' locks die with the process).
if [ "$s" = lease ]; then
  k3=$(key acquire)
  t1=$(dblock acquire --slots 2 "$k3" --ttl 60s)
  t2=$(dblock acquire --slots 2 "$k3" --ttl 60s)
  check "$s: acquire gives increasing tokens ($t1, $t2)" test "$t2" -gt "$t1"
  assert_status "$s: a third acquire exits 75" 75 dblock acquire --slots 2 "$k3"
  assert_status "$s: renew --token finds the slot" 0 dblock renew "$k3" --token "$t2" --ttl 90s
  assert_status "$s: release --token frees that slot" 0 dblock release "$k3" --token "$t1"
  assert_status "$s: releasing it again exits 76" 76 dblock release "$k3" --token "$t1"
  assert_eq "$s: one slot held, one free" "free held" \
    "$(dblock status "$k3" --json | json_field 'locks.*.state' | tr ' ' '\n' | sort | xargs)"
  t3=$(dblock acquire --slots 2 "$k3")
  check "$s: the freed slot is taken with a greater token ($t3)" test "$t3" -gt "$t2"
  assert_status "$s: release --force frees every slot" 0 dblock release "$k3" --force
  assert_eq "$s: no slot held" "free free" "$(dblock status "$k3" --json | json_field 'locks.*.state')"
fi

finish

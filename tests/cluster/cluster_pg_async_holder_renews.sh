#!/usr/bin/env bash
# Patroni in asynchronous mode, the grant replicated before the failover: when the lock-delay
# starts (issue 50). The failover lock-delay (dblock(1) GUARANTEES, "Failover lock-delay") must
# start at the first contact with the new incarnation, the holder's renewal included, so that
# it ends at most one TTL after the promotion was first seen.
# 1. A first run of the key (TTL 30 s), replicated.
# 2. A holder (--ttl 30s) takes the key; its job ends 22 s after the promotion (below), whatever
#    the promotion took; the replica replays its grant.
# 3. The leader dies by SIGKILL; Patroni promotes the replica, which has the grant.
# 4. The holder renews on the new leader and runs on. Nobody else asks, yet status (which only
#    reads) shows the lock-delay in force, begun at that renewal.
# 5. 15 s after the promotion a competitor (-w 120) asks for the key: the holder refuses it,
#    then the lock-delay, which ends one TTL after the holder's first renewal there.
# Correct: the holder completes (exit 0); the competitor starts after the holder's command ended
# and within the TTL (30 s) + a margin of the promotion; tokens jump by 2^20. Before, the renewal
# started nothing and the delay began when the holder let go (24 s after the promotion), so the
# competitor started a whole TTL after the holder ended (54 s after the kill, the operator saw).
CLUSTER_KIND=pg-async
source "$(dirname "$0")/lib.sh"

k=$(key holder-renews)
log=$E2E_TMP/lease.log
ttl_ms=30000
check "a first run of the key" dblock run --ttl 30s "$k" -- "$ORACLE_JOB" "$log" 0
run_bg holder "$E2E_TMP/holder" --ttl 30s "$k" -- "$ORACLE_JOB" "$log" 60 "$E2E_TMP/holder.pids"
check "the holder's command started" wait_for 15 starts_at_least "$log" 2
check "the replica has replayed its grant" cluster_ctl wait-replica 30
kill_leader_and_wait

# delay_until_ms: when the lock-delay in force ends (local ms), from status --json, which only
# reads the record; nothing when none is in force.
delay_until_ms() {
  local left
  left=$(dblock status "$k" --json 2>/dev/null | json_field lock_delay.until_in_ms)
  case "$left" in '' | none | null) return 1 ;; esac
  echo $(($(now_ms) + left))
}
if wait_for 15 delay_until_ms >/dev/null; then
  until_ms=$(delay_until_ms)
  first_seen=$((until_ms - ttl_ms))
  pass "the holder's renewal on the new leader started the lock-delay; nobody else had asked"
  echo "# the lock-delay began $((first_seen - $(figure promoted))) ms after the new leader took writes"
  check "it began soon after the promotion (within 12 s: the holder's renewals retry every 2 s)" \
    test $((first_seen - $(figure promoted))) -le 12000
else
  fail "no lock-delay in force 15 s after the promotion, though the holder renews there: $(tail -n 3 "$E2E_TMP/holder")"
fi
sleep $(((15000 - ($(now_ms) - $(figure promoted))) / 1000)) 2>/dev/null || true
run_bg competitor "$E2E_TMP/competitor" -w 120 "$k" -- "$ORACLE_JOB" "$log" 0.2
# The holder's job ends 22 s after the promotion, before the lock-delay does (one TTL after the
# holder's first renewal there), so the competitor meets the delay. A job of a fixed 40 s ended
# as the delay did once the promotion took 10 s, and the competitor never saw it.
sleep $(((22000 - ($(now_ms) - $(figure promoted))) / 1000)) 2>/dev/null || true
read -r _ job_sleep <"$E2E_TMP/holder.pids" && kill "$job_sleep" 2>/dev/null

job_status holder_status 60 "$holder"
job_status competitor_status 120 "$competitor"
assert_eq "the holder rode out the failover (its grant was replicated) and exits 0" 0 "$holder_status"
assert_eq "the competitor on the new leader ran and exits 0" 0 "$competitor_status"
check "the competitor met the failover lock-delay" grep -q "failover lock-delay" "$E2E_TMP/competitor"
sed 's/^/    holder: /' "$E2E_TMP/holder" | tail -n 5
grep -m1 "failover lock-delay" "$E2E_TMP/competitor" | sed 's/^/    competitor: /'
sed 's/^/    oracle log: /' "$log"
read -r h_token h_pid < <(awk '$1 == "start" { n++ } n == 2 { print $2, $4; exit }' "$log")
read -r c_token c_start c_pid < <(awk '$1 == "start" { n++ } n == 3 { print $2, int($3 / 1000000), $4; exit }' "$log")
h_end=$(awk -v p="${h_pid:-x}" '$1 == "end" && $4 == p { print int($3 / 1000000); exit }' "$log")
if [ -n "${c_start:-}" ] && [ -n "$h_end" ]; then
  promoted=$(figure promoted)
  echo "# the holder's command ended $((h_end - promoted)) ms after the new leader took writes; the competitor started $((c_start - h_end)) ms after it, $((c_start - promoted)) ms after the promotion ($((c_start - $(figure killed))) ms after the kill)"
  check "the competitor started after the holder's command ended" test "$c_start" -gt "$h_end"
  # The holder ended about 22 s after the promotion: a delay begun at its release would hold
  # the competitor until about 52 s after it.
  assert_between "the competitor started within the TTL (30 s) + 10 s of the promotion (ms)" 0 $((ttl_ms + 10000)) \
    $((c_start - promoted))
  [ -z "${until_ms:-}" ] ||
    assert_between "the competitor started as the lock-delay ended (ms after its end)" -500 5000 $((c_start - until_ms))
else
  fail "the holder's end (${h_end:-none}) or the competitor's start (${c_start:-none}) is missing"
fi
check "the competitor's token (${c_token:-none}) jumped past the holder's (${h_token:-none}) by 2^20" \
  test "${c_token:-0}" -gt $((${h_token:-0} + 1048576))
oracle_check "first run, holder and competitor one at a time, no token twice" "$log" 3
finish

#!/usr/bin/env bash
# Patroni in asynchronous mode, the grant lost in a failover (issue 29), lease strategy.
# 1. A first run of the key, replicated: the tables and the key's row are on both members.
# 2. Replication is cut: the proxy between the replica and the leader freezes.
# 3. A holder (--ttl 30s, a 25 s job) takes the key: its grant commits on the leader only.
# 4. The leader dies by SIGKILL (postmaster, Patroni and the instance's processes); Patroni
#    promotes the replica, which never saw the grant.
# 5. A competitor (-w 60) asks for the key on the new leader.
# Correct: the competitor starts only after the holder's command has ended, and no token is
# given twice. The failover lock-delay (dblock(1) GUARANTEES, "Failover lock-delay") makes it
# so: the competitor meets a new incarnation (timeline) of the database, and nothing is granted
# for the longest TTL recorded (30 s); its token jumps past every token the new leader knew.
# Without the delay the competitor took the key at once, with the holder's own token (issue 29).
# While the delay is in force, status and doctor show it.
CLUSTER_KIND=pg-async
source "$(dirname "$0")/lib.sh"

log=$E2E_TMP/lost.log
k=$(key lost-grant)
check "a first run of the key" dblock run "$k" -- "$ORACLE_JOB" "$log" 0
check "the replica has replayed it" cluster_ctl wait-replica 30
check "replication frozen" cluster_ctl freeze-replication
run_bg holder "$E2E_TMP/holder.out" --ttl 30s "$k" -- "$ORACLE_JOB" "$log" 25
check "the holder's command started" wait_for 15 starts_at_least "$log" 2
sleep 1
kill_leader_and_wait
run_bg competitor "$E2E_TMP/competitor.out" -w 60 "$k" -- "$ORACLE_JOB" "$log" 0.2
if wait_for 20 grep -q "failover lock-delay" "$E2E_TMP/competitor.out"; then
  pass "the competitor meets the failover lock-delay"
  echo "# $(grep -m1 "failover lock-delay" "$E2E_TMP/competitor.out")"
  dblock status "$k" >/dev/null 2>"$E2E_TMP/status.err"
  check "status: every key blocked by the lock-delay, until when" grep -q "blocked by the failover lock-delay .* until" \
    "$E2E_TMP/status.err"
  check "status --json: the lock-delay's end" test "$(dblock status "$k" --json | json_field lock_delay.until)" != null
  dblock doctor >"$E2E_TMP/doctor" 2>&1
  sed -n 's/^/    doctor: /; /replication\|failover/p' "$E2E_TMP/doctor"
  check "doctor: the replication mode" grep -q "replication: synchronous_commit=" "$E2E_TMP/doctor"
  check "doctor: the lock-delay in force" grep -q "failover: lock-delay in force" "$E2E_TMP/doctor"
else
  fail "the competitor did not meet the failover lock-delay: $(tail -n 3 "$E2E_TMP/competitor.out")"
fi
job_status holder_status 60 "$holder"
job_status competitor_status 60 "$competitor"
echo "# holder exit $holder_status, competitor exit $competitor_status"
sed 's/^/    holder: /' "$E2E_TMP/holder.out" | tail -n 5
sed 's/^/    competitor: /' "$E2E_TMP/competitor.out" | tail -n 5
sed 's/^/    oracle log: /' "$log"
# The oracle stops at a repeated token; by pid, the overlap and the order of tokens too.
read -r h_token h_pid < <(awk '$1 == "start" { n++ } n == 2 { print $2, $4; exit }' "$log")
read -r c_token c_start c_pid < <(awk '$1 == "start" { n++ } n == 3 { print $2, $3, $4; exit }' "$log")
h_end=$(awk -v p="${h_pid:-x}" '$1 == "end" && $4 == p { print $3; exit }' "$log")
if [ -n "${c_start:-}" ] && [ -n "$h_end" ]; then
  check "lost grant: the competitor started after the holder's command ended (by $(((c_start - h_end) / 1000000)) ms)" \
    test "$c_start" -gt "$h_end"
else
  fail "lost grant: the holder's end (${h_end:-none}) or the competitor's start (${c_start:-none}) is missing"
fi
check "lost grant: the competitor's token (${c_token:-none}) is greater than the holder's (${h_token:-none})" \
  test "${c_token:-0}" -gt "${h_token:-0}"
check "lost grant: no token repeats across the promotion ($(tokens_of "$log"))" \
  test -z "$(tokens_of "$log" | tr ' ' '\n' | sort | uniq -d)"
if [ -n "${c_start:-}" ]; then
  echo "# the competitor started $(((c_start / 1000000) - $(figure promoted))) ms after the new leader took writes"
fi
oracle_check "lost grant: first run, holder and competitor one at a time, no token twice" "$log" 3
finish

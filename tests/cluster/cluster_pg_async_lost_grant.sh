#!/usr/bin/env bash
# Patroni in asynchronous mode, the grant lost in a failover (issue 29); every strategy of
# DBLOCK_TEST_STRATEGIES (lib.sh) side by side, a key and an oracle log each, on one cluster.
# 1. A first run of each key, replicated: the tables and the keys' rows are on both members.
# 2. Replication is cut: the proxy between the replica and the leader freezes.
# 3. A holder per strategy (--ttl 30s, a 25 s job) takes its key: its grant commits on the
#    leader only.
# 4. The leader dies by SIGKILL (postmaster, Patroni and the instance's processes); Patroni
#    promotes the replica, which never saw the grants.
# 5. A competitor per strategy (-w 60) asks for its key on the new leader.
# Correct: the competitor starts only after the holder's command has ended, and no token is
# given twice. The holder's command is stopped (exit 76): a lease holder's renewal on the new
# leader finds no lease; a session strategy's session dies with the old leader. The failover
# lock-delay (dblock(1) GUARANTEES, "Failover lock-delay") holds the competitor back: it meets
# a new incarnation (timeline) of the database, and nothing is granted for the longest TTL
# recorded (30 s); its token jumps past every token the new leader knew. Without the delay the
# competitor took the key at once, with the holder's own token (issue 29); a session strategy's
# too, as the server lock died with the old leader. While the delay is in force, status and
# doctor show it.
CLUSTER_KIND=pg-async
source "$(dirname "$0")/lib.sh"

for s in "${strategies[@]}"; do
  check "$s: a first run of the key" dblock run -s "$s" "$(key "lost-grant-$s")" -- "$ORACLE_JOB" "$E2E_TMP/$s.log" 0
done
check "the replica has replayed them" cluster_ctl wait-replica 30
check "replication frozen" cluster_ctl freeze-replication
declare -A holder competitor
for s in "${strategies[@]}"; do
  run_bg "holder[$s]" "$E2E_TMP/$s.holder" -s "$s" --ttl 30s "$(key "lost-grant-$s")" -- "$ORACLE_JOB" "$E2E_TMP/$s.log" 25
done
for s in "${strategies[@]}"; do
  check "$s: the holder's command started" wait_for 15 starts_at_least "$E2E_TMP/$s.log" 2
done
sleep 1
kill_leader_and_wait
for s in "${strategies[@]}"; do
  run_bg "competitor[$s]" "$E2E_TMP/$s.competitor" -s "$s" -w 60 "$(key "lost-grant-$s")" -- \
    "$ORACLE_JOB" "$E2E_TMP/$s.log" 0.2
done
delayed=()
for s in "${strategies[@]}"; do
  if wait_for 20 grep -q "failover lock-delay" "$E2E_TMP/$s.competitor"; then
    pass "$s: the competitor meets the failover lock-delay"
    echo "# $s: $(grep -m1 "failover lock-delay" "$E2E_TMP/$s.competitor")"
    delayed+=("$s")
  else
    fail "$s: the competitor did not meet the failover lock-delay: $(tail -n 3 "$E2E_TMP/$s.competitor")"
  fi
done
# The lock-delay is the database's, whatever the key and strategy: asked once.
if [ ${#delayed[@]} -gt 0 ]; then
  k=$(key "lost-grant-${delayed[0]}")
  dblock status "$k" >/dev/null 2>"$E2E_TMP/status.err"
  check "status: every key blocked by the lock-delay, until when" grep -q "blocked by the failover lock-delay .* until" \
    "$E2E_TMP/status.err"
  check "status --json: the lock-delay's end" test "$(dblock status "$k" --json | json_field lock_delay.until)" != null
  dblock doctor >"$E2E_TMP/doctor" 2>&1
  sed -n 's/^/    doctor: /; /replication\|failover/p' "$E2E_TMP/doctor"
  check "doctor: the replication mode" grep -q "replication: synchronous_commit=" "$E2E_TMP/doctor"
  check "doctor: the lock-delay in force" grep -q "failover: lock-delay in force" "$E2E_TMP/doctor"
fi
for s in "${strategies[@]}"; do
  log=$E2E_TMP/$s.log
  job_status holder_status 60 "${holder[$s]}"
  job_status competitor_status 60 "${competitor[$s]}"
  assert_eq "$s: the holder's command is stopped (exit 76)" 76 "$holder_status"
  assert_eq "$s: the competitor on the new leader ran and exits 0" 0 "$competitor_status"
  sed 's/^/    holder: /' "$E2E_TMP/$s.holder" | tail -n 5
  sed 's/^/    competitor: /' "$E2E_TMP/$s.competitor" | tail -n 5
  sed 's/^/    oracle log: /' "$log"
  # The oracle stops at a repeated token; by pid, the overlap and the order of tokens too.
  read -r h_token h_pid < <(awk '$1 == "start" { n++ } n == 2 { print $2, $4; exit }' "$log")
  read -r c_token c_start c_pid < <(awk '$1 == "start" { n++ } n == 3 { print $2, $3, $4; exit }' "$log")
  h_end=$(awk -v p="${h_pid:-x}" '$1 == "end" && $4 == p { print $3; exit }' "$log")
  if [ -n "${c_start:-}" ] && [ -n "$h_end" ]; then
    check "$s: the competitor started after the holder's command ended (by $(((c_start - h_end) / 1000000)) ms)" \
      test "$c_start" -gt "$h_end"
  else
    fail "$s: the holder's end (${h_end:-none}) or the competitor's start (${c_start:-none}) is missing"
  fi
  check "$s: the competitor's token (${c_token:-none}) is greater than the holder's (${h_token:-none})" \
    test "${c_token:-0}" -gt "${h_token:-0}"
  check "$s: no token repeats across the promotion ($(tokens_of "$log"))" \
    test -z "$(tokens_of "$log" | tr ' ' '\n' | sort | uniq -d)"
  echo "# $s: holder exit $holder_status; tokens $(tokens_of "$log")"
  [ -z "$h_end" ] || echo "# $s: the holder's command ended $((h_end / 1000000 - $(figure killed))) ms after the kill"
  [ -z "${c_start:-}" ] ||
    echo "# $s: the competitor started $((c_start / 1000000 - $(figure promoted))) ms after the new leader took writes"
  oracle_check "$s: first run, holder and competitor one at a time, no token twice" "$log" 3
  unset h_token h_pid c_token c_start c_pid
done
finish

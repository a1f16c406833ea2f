#!/usr/bin/env bash
# Rolling upgrade in this cell: the previous release (tests/upgrade/build_previous.sh, NEWS
# names it) and this build on one database, tables made by the previous one, as on the day a
# farm starts upgrading host by host.
#  1. Each version reads the other's rows (status, history, check) and `release --force` of
#     either frees the other's holder (the holder stops, exit 76) without touching a stranger
#     (another key's holder of the same version keeps running and holding).
#  2. Chaos: four workers, two of each version, loop `run -w` on one key while the test kills
#     a random holder's dblock with SIGKILL every 1.0-1.4 s (10 s and at least 4 kills). Never two commands at once
#     (semaphore_job.sh with one slot: a flock(2) marker held by the whole job tree, exact
#     even for killed jobs), every token given once and greater than every token of a run
#     that had ended before it was acquired (oracle.py tokens, on the job log and the history
#     either version reads), and no run fails other than by its kill.
source "$(dirname "$0")/../faults/lib.sh"

s=$DBLOCK_STRATEGY
prev=${DBLOCK_PREVIOUS_DIR:-$DBLOCK_SOURCE_DIR/build/previous}
if [ ! -x "$prev/dblock" ]; then
  skip_or_fail "no previous release to test against: $(cat "$prev/unavailable" 2>/dev/null || echo "$prev/dblock is missing (ninja dblock_previous builds it)")"
fi
# Paths, not shell functions: start_bg must get dblock's own pid, to signal it.
old=$prev/dblock
new=$DBLOCK_BIN

# Two different programs, or every check below would pass trivially.
old_version=$("$old" --version | head -n 1)
new_version=$("$new" --version | head -n 1)
echo "      previous: $old_version; this build: $new_version"
check "the previous release is commit $(cat "$prev/commit" | cut -c1-12)" grep -q "git $(cut -c1-12 "$prev/commit")" <<<"$old_version"
check "the two versions differ" test "$old_version" != "$new_version"
# NEWS's entry before this version is the release built here.
previous=$(grep -E '^[0-9]+\.[0-9]+\.[0-9]+ \(' "$DBLOCK_SOURCE_DIR/NEWS" | sed -n '2s/ .*//p')
check "the previous release reports NEWS's previous version ($previous)" grep -q "^dblock $previous " <<<"$old_version"

assert_status "$s: the previous release makes the tables" 0 "$old" init
token_of() { cat "$E2E_TMP/$1.token" 2>/dev/null; }

# cross HOLDER READER: HOLDER's version holds a key (and a stranger another key); READER's
# version reads what HOLDER wrote and force-releases the key.
cross() {
  local hv=$1 rv=$2 k h other rc holder stranger out t
  k=$(key "$hv-held") h=$(key "$hv-hist") other=$(key "$hv-stranger")
  assert_status "$s $hv: a finished run" 0 "${!hv}" run "$h" -- sh -c "echo \$DBLOCK_TOKEN >'$E2E_TMP/$hv-hist.token'"
  start_bg holder "${!hv}" run "$k" --ttl 6s -- sh -c "echo \$DBLOCK_TOKEN >'$E2E_TMP/$hv-held.token'; exec sleep 60"
  start_bg stranger "${!hv}" run "$other" --ttl 6s -- sh -c "echo \$DBLOCK_TOKEN >'$E2E_TMP/$hv-other.token'; exec sleep 60"
  if ! wait_for 15 test -s "$E2E_TMP/$hv-held.token" || ! wait_for 15 test -s "$E2E_TMP/$hv-other.token"; then
    fail "$s $hv: the holders did not start"
    return
  fi
  t=$(token_of "$hv-held")

  out=$("${!rv}" status "$k" --json 2>&1)
  assert_eq "$s $rv reads $hv's holder (status --json: state, token)" "held $t" "$(json_field locks.0.state locks.0.token <<<"$out")"
  assert_status "$s $rv: status -q of $hv's held key" 0 "${!rv}" status -q "$k"
  out=$("${!rv}" history "$h" --json 2>&1)
  assert_eq "$s $rv reads $hv's history (token, outcome, exit code)" "$(token_of "$hv-hist") ok 0" \
    "$(json_field runs.0.token runs.0.outcome runs.0.exit_code <<<"$out")"
  assert_status "$s $rv: check of $hv's run" 0 "${!rv}" check "$h" --max-age 1h
  out=$("${!rv}" metrics "$h" "$k" 2>&1)
  assert_eq "$s $rv: metrics of $hv's keys (tokens, held)" "$(token_of "$hv-hist") $t 1" \
    "$(awk -v h="{key=\"$h\"}" -v k="{key=\"$k\"}" '$1 == "dblock_lock_token" h { a = $2 } $1 == "dblock_lock_token" k { b = $2 }
       $1 == "dblock_lock_held" k { c = $2 } END { print a, b, c }' <<<"$out")"

  assert_status "$s $rv: release --force of $hv's holder" 0 "${!rv}" release --force "$k"
  wait_exit rc "$holder" 20
  assert_eq "$s $hv's holder stops when $rv force-releases it" 76 "$rc"
  check "$s $hv's stranger still runs" kill -0 "$stranger"
  assert_status "$s $hv's stranger still holds its key ($rv status)" 0 "${!rv}" status -q "$other"
  assert_status "$s $hv's stranger still holds its key ($hv status)" 0 "${!hv}" status -q "$other"
  assert_status "$s $rv takes the freed key" 0 "${!rv}" run "$k" -- sh -c "echo \$DBLOCK_TOKEN >'$E2E_TMP/$rv-after.token'"
  check "$s $rv's token ($(token_of "$rv-after")) is above $hv's ($t)" test "$(token_of "$rv-after")" -gt "$t"
  kill -TERM "$stranger"
  wait_exit rc "$stranger" 20
}
cross old new
cross new old

# The chaos of a farm half upgraded.
k=$(key chaos)
dir=$E2E_TMP/chaos
mkdir -p "$dir"
: >"$dir/log"
JOB=$FAULTS_DIR/semaphore_job.sh
CHAOS_SECONDS=${CHAOS_SECONDS:-10}
worker() {
  local v=$1 i=$2
  while [ ! -e "$E2E_TMP/stop" ]; do
    "${!v}" run -w 60 --ttl 3s "$k" -- "$JOB" "$dir" 1 "0.$((RANDOM % 5 + 2))" >>"$E2E_TMP/w$i.out" 2>&1
    echo $? >>"$E2E_TMP/$v.$i.rc"
  done
}
workers=()
for i in 1 2 3 4; do
  v=new
  [ $((i % 2)) = 1 ] && v=old
  worker $v $i &
  workers+=($!)
  remember_pid $!
done

# At least CHAOS_SECONDS and 4 kills (a killed lease blocks the key for a TTL), at most 40 s.
kills=0
started=$(now_ms)
until [ $(($(now_ms) - started)) -ge $((CHAOS_SECONDS * 1000)) -a "$kills" -ge 4 ] ||
  [ $(($(now_ms) - started)) -ge 40000 ]; do
  sleep "1.$((RANDOM % 5))"
  kill_running_holder "$dir/log" && kills=$((kills + 1))
done
touch "$E2E_TMP/stop"
for pid in "${workers[@]}"; do
  wait_exit rc "$pid" 90
  [ "$rc" = 0 ] || fail "$s: a worker did not finish after the chaos ($rc)"
done

runs() { cat "$E2E_TMP/$1".*.rc 2>/dev/null | grep -cx "$2"; }
echo "      $s: previous release: $(runs old 0) runs, $(runs old 137) killed; this build: $(runs new 0) runs, $(runs new 137) killed"
check "$s: both versions ran the job" test "$(runs old 0)" -ge 1 -a "$(runs new 0)" -ge 1
check "$s: SIGKILLed at least 4 holders ($kills)" test "$kills" -ge 4
if [ -s "$dir/over" ]; then
  fail "$s: two commands ran at once: $(head -n 3 "$dir/over" | tr '\n' ';')"
else
  pass "$s: never two commands at once ($(grep -c '^start' "$dir/log") runs, $kills killed)"
fi
for v in new old; do
  "${!v}" history --json --limit 100000 "$k" >"$dir/history.$v.json" || fail "$s: $v history failed"
done
assert_eq "$s: both versions read the same history" "$(json_field 'runs.*.token' <"$dir/history.new.json")" "$(json_field 'runs.*.token' <"$dir/history.old.json")"
if out=$(python3 "$ORACLE" tokens "$dir/log" 8 "$dir/history.new.json" 2>&1); then pass "$s: tokens: $out"; else fail "$s: tokens: $out"; fi
others=$(cat "$E2E_TMP"/*.rc | grep -vxE '0|137' | sort | uniq -c | xargs)
assert_eq "$s: every run exited 0, or 137 when killed" "" "$others"
finish

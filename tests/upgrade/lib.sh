# Shared by the rolling-upgrade scripts (tests/upgrade/upgrade_*.sh): sourced, never run.
# Builds on tests/faults/lib.sh and sets $old (the previous release, which
# tests/upgrade/build_previous.sh built; NEWS names it) and $new (this build), checked to be
# two different programs, or every check of a script would pass trivially.
source "$(dirname "${BASH_SOURCE[0]}")/../faults/lib.sh"

s=$DBLOCK_STRATEGY
prev=${DBLOCK_PREVIOUS_DIR:-$DBLOCK_SOURCE_DIR/build/previous}
if [ ! -x "$prev/dblock" ]; then
  skip_or_fail "no previous release to test against: $(cat "$prev/unavailable" 2>/dev/null || echo "$prev/dblock is missing (ninja dblock_previous builds it)")"
fi
# Paths, not shell functions: start_bg must get dblock's own pid, to signal it.
old=$prev/dblock
new=$DBLOCK_BIN

old_version=$("$old" --version | head -n 1)
new_version=$("$new" --version | head -n 1)
echo "      previous: $old_version; this build: $new_version"
check "the previous release is commit $(cut -c1-12 "$prev/commit")" grep -q "git $(cut -c1-12 "$prev/commit")" <<<"$old_version"
check "the two versions differ" test "$old_version" != "$new_version"
# NEWS's entry before this version is the release built here.
previous=$(grep -E '^[0-9]+\.[0-9]+\.[0-9]+ \(' "$DBLOCK_SOURCE_DIR/NEWS" | sed -n '2s/ .*//p')
check "the previous release reports NEWS's previous version ($previous)" grep -q "^dblock $previous " <<<"$old_version"

# chaos NAME OLD NEW: the chaos of a farm half upgraded, on the key NAME. Four workers, two of
# each version (OLD and NEW: the command that runs each, a path or a shell function), loop
# `run -w` on one key while the test kills a random holder's dblock with SIGKILL after every
# fourth job (CHAOS_SECONDS, 10 by default, and at least 4 kills). Never two commands at once
# (semaphore_job.sh with one slot: a flock(2) marker held by the whole job tree, exact even for
# killed jobs), every token given once and greater than every token of a run that had ended
# before it was acquired (oracle.py tokens, on the job log and the history either version
# reads), and no run fails other than by its kill. Each worker's runs' exit codes are in
# $E2E_TMP/NAME/VERSION.I.rc, their output in $E2E_TMP/NAME/wI.out.
chaos() {
  local name=$1 k dir i v pid rc kills looks started others out before after row
  local -A cmd=([old]=$2 [new]=$3)
  k=$(key "$name")
  dir=$E2E_TMP/$name
  mkdir -p "$dir"
  : >"$dir/log"
  local workers=()
  # Each worker a process group of its own (job control), so the cleanup's kill of the group
  # (e2e_cleanup) ends the `run -w` in progress too, not only the loop: a test stopped mid-chaos
  # left each worker's run waiting up to 60 s.
  set -m
  for i in 1 2 3 4; do
    v=new
    [ $((i % 2)) = 1 ] && v=old
    {
      set +m  # the group is made; inside it no job control, whose notices report each kill
      while [ ! -e "$dir/stop" ]; do
        "${cmd[$v]}" run -w 60 --ttl 3s "$k" -- "$FAULTS_DIR/semaphore_job.sh" "$dir" 1 "0.$((RANDOM % 5 + 2))" >>"$dir/w$i.out" 2>&1
        echo $? >>"$dir/$v.$i.rc"
      done
    } &
    workers+=($!)
    remember_pid $!
  done
  set +m

  # At least CHAOS_SECONDS, 4 kills (a killed lease blocks the key for a TTL) and 3 looks, at
  # most 60 s, a kill after every four jobs' starts. At each of those starts, the key's row
  # (status --json) must carry the token of the job that runs before and after the read: a
  # token is given only with the lock, never over a live holder (a numbering sent with a lock
  # statement that was refused must number nothing). A look counts only when one job runs
  # throughout it; the chaos goes on until 3. A look begins as a job starts (its 0.2-0.6 s all
  # ahead), only the status runs between the two reads of the log, and the rows are read after
  # the chaos: on a busy 2-core host whose page faults cost 20 us a PostgreSQL status took
  # 0.2-1.0 s and python's start (json_field) 0.5-2 s, and a CI run's looks all fell across two
  # jobs (0 in 40 s) while its kills came 2-3 in 40 s.
  kills=0 looks=0
  local seen=
  started=$(now_ms)
  until [ $(($(now_ms) - started)) -ge $((${CHAOS_SECONDS:-10} * 1000)) -a "$kills" -ge 4 -a "$looks" -ge 3 ] ||
    [ $(($(now_ms) - started)) -ge 60000 ]; do
    for i in 1 2 3 4; do
      # A job not looked at yet, up to 5 s: after a kill a lease's key runs none for a TTL.
      for _ in $(seq 250); do
        running_jobs before "$dir/log"
        [ -n "$before" ] && [ "$before" != "$seen" ] && break
        sleep 0.02
      done
      seen=$before
      out=$("$new" status "$k" --json 2>/dev/null)
      running_jobs after "$dir/log"
      if [ -n "$before" ] && [ "$before" = "$after" ] && [[ $before != *$'\n'* ]]; then
        looks=$((looks + 1))
        printf '%s\n' "${before%% *}" >"$dir/look.$looks.token"
        printf '%s\n' "$out" >"$dir/look.$looks.json"
      fi
    done
    kill_running_holder "$dir/log" && kills=$((kills + 1))
  done
  touch "$dir/stop"
  for pid in "${workers[@]}"; do
    wait_exit rc "$pid" 90
    [ "$rc" = 0 ] || fail "$s $name: a worker did not finish after the chaos ($rc)"
  done

  runs() { cat "$dir/$1".*.rc 2>/dev/null | grep -cx "$2"; }
  echo "      $s $name: previous release: $(runs old 0) runs, $(runs old 137) killed; this build: $(runs new 0) runs, $(runs new 137) killed"
  check "$s $name: both versions ran the job" test "$(runs old 0)" -ge 1 -a "$(runs new 0)" -ge 1
  check "$s $name: SIGKILLed at least 4 holders ($kills)" test "$kills" -ge 4
  if [ -s "$dir/over" ]; then
    fail "$s $name: two commands ran at once: $(head -n 3 "$dir/over" | tr '\n' ';')"
  else
    pass "$s $name: never two commands at once ($(grep -c '^start' "$dir/log") runs, $kills killed)"
  fi
  # One python for every look (a start costs up to 1 s on a slow host).
  python3 - "$dir" "$looks" >>"$dir/row" <<'PY'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(1, n + 1):
    running = open(f"{d}/look.{i}.token").read().strip()
    try:
        row = str(json.load(open(f"{d}/look.{i}.json"))["locks"][0]["token"])
    except (ValueError, LookupError, TypeError):
        row = "(none)"
    if row != running:
        print(f"token {running} runs, the key's row carries token {row}")
PY
  if [ -s "$dir/row" ]; then
    fail "$s $name: a token was given over a live holder: $(head -n 3 "$dir/row" | tr '\n' ';')"
  else
    check "$s $name: the key's row carried the running job's token ($looks looks)" test "$looks" -ge 3
  fi
  for v in new old; do
    "${!v}" history --json --limit 100000 "$k" >"$dir/history.$v.json" || fail "$s $name: $v history failed"
  done
  assert_eq "$s $name: both versions read the same history" "$(json_field 'runs.*.token' <"$dir/history.new.json")" "$(json_field 'runs.*.token' <"$dir/history.old.json")"
  if out=$(python3 "$ORACLE" tokens "$dir/log" 8 "$dir/history.new.json" 2>&1); then pass "$s $name: tokens: $out"; else fail "$s $name: tokens: $out"; fi
  others=$(cat "$dir"/*.rc | grep -vxE '0|137' | sort | uniq -c | xargs)
  assert_eq "$s $name: every run exited 0, or 137 when killed" "" "$others"
  [ -z "$others" ] || grep -h . "$dir"/w*.out | sort | uniq -c | sort -rn | head -n 5 | sed 's/^/    | /'
}

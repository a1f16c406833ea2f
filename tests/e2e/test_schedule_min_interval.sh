#!/usr/bin/env bash
# run --min-interval (the "next_run" pattern): every host's cron fires often, the job starts at
# most once per interval across the farm, and a dead host is covered by the others.
source "$(dirname "$0")/lib.sh"

starts="$E2E_TMP/starts"
# tick_loop OWNER KEY INTERVAL TICKS: one "host" whose cron fires every second.
tick_loop() {
  local i
  for ((i = 0; i < $4; i++)); do
    dblock run "$2" --owner "$1" --min-interval "$3" -E 0 -- \
      sh -c "echo \"\$DBLOCK_OWNER \$(date +%s%N)\" >>\"$starts\""
    sleep 1
  done
}

# Three hosts ticking every second, 10 ticks each, an interval of 4 s: starts at about 0, 4 and
# 8 s. Ten ticks take 10 s plus ten runs, which a loaded machine stretches past 12 s: the bound
# on the number of starts is one per interval less its tolerance (3.6 s) over the time the ticks
# really took, not over 10 s.
# The farm runs beside the other parts below (keys and a starts file of their own).
farm() {
  local k ticks_from ticks_took n db_gaps gaps gap h
  k=$(key farm)
  ticks_from=$(now_ms)
  for h in 1 2 3; do
    tick_loop "host-$h" "$k" 4 10 &
    remember_pid $!
    sleep 0.3
  done
  wait
  ticks_took=$(($(now_ms) - ticks_from))
  n=$(wc -l <"$starts")
  assert_between "at most one start per 3.6 s in the ${ticks_took} ms of ticks with --min-interval 4s" \
    2 $((ticks_took / 3600 + 1)) "$n"
  # --min-interval is measured between acquisitions, on the database's clock: the history's
  # started_at. Not before the interval less its start tolerance (a tenth, dblock(1)): exact, in
  # database time. The commands' own start times add how long each took to start after its
  # acquisition, which a loaded machine stretches by hundreds of ms: only the upper bound (the
  # first tick after the interval, plus scheduling slack) is checked on them.
  db_gaps=$(dblock history "$k" --json --limit 1000 | python3 -c '
import datetime, json, sys
ts = sorted(datetime.datetime.fromisoformat(r["started_at"].replace("Z", "+00:00")).timestamp()
            for r in json.load(sys.stdin)["runs"])
for a, b in zip(ts, ts[1:]): print(round((b - a) * 1000))')
  assert_eq "the history has a start per run" "$((n - 1))" "$(wc -w <<<"$db_gaps")"
  # 3599: the history stamps each start on the wall clock to the millisecond, while the take
  # judged the interval on its own stamps (SQLite: CLOCK_BOOTTIME, also to the millisecond); two
  # clocks cut to whole milliseconds at different phases can differ by one.
  for gap in $db_gaps; do
    assert_between "acquisitions are at least 4 s less its tolerance apart (database time)" 3599 6500 "$gap"
  done
  gaps=$(awk 'NR > 1 { printf "%d\n", ($2 - prev) / 1000000 } { prev = $2 }' "$starts")
  for gap in $gaps; do
    assert_between "the commands start about 4 s apart" 2000 6500 "$gap"
  done
  assert_eq "history has one row per start" "$n" \
    "$(history_field "$k" runs.#)"
}
in_parallel farm farm

# Not yet due: the conflict exit code, at once, and -v says when it will be due.
k=$(key due)
assert_status "first run is due" 0 dblock run "$k" --min-interval 1h -- true
start=$(now_ms)
dblock -v run "$k" --min-interval 1h -- touch "$E2E_TMP/not-due-ran" 2>"$E2E_TMP/due.err"
assert_eq "not yet due: conflict exit code" 75 $?
assert_between "the skip is immediate" 0 3000 $(($(now_ms) - start))
check "the command did not run" test ! -e "$E2E_TMP/not-due-ran"
check "-v says --min-interval" grep -q -- "--min-interval" "$E2E_TMP/due.err"
check "-v says when it is due (in 59m...)" grep -q "due in 59m" "$E2E_TMP/due.err"
assert_status "-E changes the not-due code" 3 dblock run "$k" --min-interval 1h -E 3 -- true
out=$(dblock run "$k" --min-interval 1h -E 0 -- echo ran 2>&1)
assert_eq "-E 0: silent skip" "" "$out"
check "the lock itself is free" is_free "$k"

# With -w, a not-yet-due run waits until it is due.
k=$(key wait)
assert_status "first run" 0 dblock run "$k" --min-interval 2 -- true
start=$(now_ms)
assert_status "-w waits until due" 0 dblock run "$k" --min-interval 2 -w 6 -- true
assert_between "started about 2 s after the first" 1000 4500 $(($(now_ms) - start))
assert_status "-w shorter than the remaining interval gives up" 75 dblock run "$k" --min-interval 10 -w 0.5 -- true

# The usual winner dies: another host runs the job at its next tick after the interval.
k=$(key failover)
starts="$E2E_TMP/starts.failover"
: >"$starts"
tick_loop host-a "$k" 3 20 &
a=$!
remember_pid $a
check "host-a runs first" wait_for 5 grep -q host-a "$starts"
tick_loop host-b "$k" 3 20 &
b=$!
remember_pid $b
sleep 0.5
kill -KILL $a
wait $a 2>/dev/null
check "host-b takes over within interval + a tick" wait_for 8 grep -q host-b "$starts"
kill -KILL $b
wait $b 2>/dev/null
a_at=$(awk '$1 == "host-a" { print $2; exit }' "$starts")
b_at=$(awk '$1 == "host-b" { print $2; exit }' "$starts")
# As for the farm: the interval is kept between acquisitions, on the database's clock (the
# history's started_at), exactly: not before 3 s less its tolerance. The commands' start times
# add how long host-a's command took to start after its acquisition (hundreds of ms on a loaded
# machine): only the upper bound is checked on them.
db_gap=$(dblock history "$k" --json --limit 10 | python3 -c '
import datetime, json, sys
ts = sorted(datetime.datetime.fromisoformat(r["started_at"].replace("Z", "+00:00")).timestamp()
            for r in json.load(sys.stdin)["runs"])
print(round((ts[1] - ts[0]) * 1000) if len(ts) > 1 else "none")')
if [ -n "$a_at" ] && [ -n "$b_at" ] && [ "$db_gap" != none ]; then
  assert_between "host-b waited for the interval less its tolerance (database time)" 2700 6000 "$db_gap"
  assert_between "host-b started within the interval and a tick (command times)" 0 6000 $(((b_at - a_at) / 1000000))
else
  fail "both hosts recorded a start"
fi
assert_eq "host-a ran once before it died" 1 "$(grep -c host-a "$starts")"

join_parallel

finish

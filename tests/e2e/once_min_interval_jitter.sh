#!/usr/bin/env bash
# --min-interval under cron's jitter (dblock(1), --min-interval): a cron line every period P
# with --min-interval 2P runs in exactly every second period, even when a due start comes a
# little early. 8 cycles of 2 s with starts up to 100 ms early or late and a 4 s interval (its
# tolerance is 400 ms); the due cycles (the even ones) alternate late and early, the others
# jitter either way: every combination once (12 cycles of 3 s repeated the first four, and
# took 36 s).
# The interval is measured from the last acquisition (history's started_at, the database's
# clock), so the cycles are placed from it too: a fixed timetable would also count how late a
# loaded machine's previous run was acquired, and that is not cron's jitter. The offsets stay
# exact against the rule; only this run's own start can make it later, which is the safe side.
source "$(dirname "$0")/lib.sh"

k=$(key every2)
runs="$E2E_TMP/runs"
: >"$runs"
# last_start_ms: the newest history row's started_at, in ms (0 when there is none).
last_start_ms() {
  dblock history "$k" --json --limit 1 | python3 -c '
import datetime, json, sys
runs = json.load(sys.stdin)["runs"]
print(round(datetime.datetime.fromisoformat(runs[0]["started_at"].replace("Z", "+00:00")).timestamp() * 1000)
      if runs else 0)'
}
anchor=$(($(now_ms) + 300)) anchor_cycle=0 seen=0
for ((i = 0; i < 8; i++)); do
  case $((i % 4)) in
    0) offset=100 ;;   # a due start, late
    2) offset=-100 ;;  # a due start, early: the case cron's jitter makes
    *) offset=$(((i % 8 == 1) ? -100 : 100)) ;;
  esac
  at=$((anchor + (i - anchor_cycle) * 2000 + offset))
  left=$((at - $(now_ms)))
  [ "$left" -gt 0 ] && sleep "$(printf '%d.%03d' $((left / 1000)) $((left % 1000)))"
  dblock run "$k" --min-interval 4s -E 0 -- sh -c "echo $i >>'$runs'" 2>>"$E2E_TMP/err"
  if [ "$(wc -l <"$runs")" -gt "$seen" ]; then
    seen=$(wc -l <"$runs")
    anchor=$(last_start_ms) anchor_cycle=$i
  fi
done
assert_eq "exactly the even cycles ran" "0 2 4 6" "$(tr '\n' ' ' <"$runs" | sed 's/ $//')"
[ -s "$E2E_TMP/err" ] && sed 's/^/    stderr: /' "$E2E_TMP/err"

# The skip line names the last start and its host.
dblock -v run "$k" --min-interval 1h -- true 2>"$E2E_TMP/skip.err"
assert_eq "not due: exit 75" 75 $?
if grep -qE "ran less than --min-interval ago \(last started 20[0-9-]+T[0-9:.]+Z on $(hostname)\); due in" "$E2E_TMP/skip.err"; then
  pass "the skip names the last start and host"
else
  fail "the skip names the last start and host: $(cat "$E2E_TMP/skip.err")"
fi
finish

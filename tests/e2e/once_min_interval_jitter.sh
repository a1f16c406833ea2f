#!/usr/bin/env bash
# --min-interval under cron's jitter (dblock(1), --min-interval): a cron line every period P
# with --min-interval 2P runs in exactly every second period, even when a due start comes a
# little early. 20 cycles of 3 s with starts up to 100 ms early or late and a 6 s interval (its
# tolerance is 600 ms: the 400 ms left over absorb a loaded machine's slower starts); the due
# cycles (the even ones) alternate late and early, the others jitter either way.
source "$(dirname "$0")/lib.sh"

k=$(key every2)
runs="$E2E_TMP/runs"
: >"$runs"
t0=$(($(now_ms) + 300))
for ((i = 0; i < 20; i++)); do
  case $((i % 4)) in
    0) offset=100 ;;   # a due start, late
    2) offset=-100 ;;  # a due start, early: the case cron's jitter makes
    *) offset=$(((i % 8 == 1) ? -100 : 100)) ;;
  esac
  at=$((t0 + i * 3000 + offset))
  left=$((at - $(now_ms)))
  [ "$left" -gt 0 ] && sleep "$(printf '%d.%03d' $((left / 1000)) $((left % 1000)))"
  dblock run "$k" --min-interval 6s -E 0 -- sh -c "echo $i >>'$runs'" 2>>"$E2E_TMP/err"
done
assert_eq "exactly the even cycles ran" "0 2 4 6 8 10 12 14 16 18" "$(tr '\n' ' ' <"$runs" | sed 's/ $//')"

# The skip line names the last start and its host.
dblock -v run "$k" --min-interval 1h -- true 2>"$E2E_TMP/skip.err"
assert_eq "not due: exit 75" 75 $?
if grep -qE "ran less than --min-interval ago \(last started 20[0-9-]+T[0-9:.]+Z on $(hostname)\); due in" "$E2E_TMP/skip.err"; then
  pass "the skip names the last start and host"
else
  fail "the skip names the last start and host: $(cat "$E2E_TMP/skip.err")"
fi
finish

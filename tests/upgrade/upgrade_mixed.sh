#!/usr/bin/env bash
# Rolling upgrade in this cell: the previous release (tests/upgrade/build_previous.sh, NEWS
# names it) and this build on one database, tables made by the previous one, as on the day a
# farm starts upgrading host by host.
#  1. Each version reads the other's rows (status, history, check) and `release --force` of
#     either frees the other's holder (the holder stops, exit 76) without touching a stranger
#     (another key's holder of the same version keeps running and holding).
#  2. Chaos (tests/upgrade/lib.sh's chaos): two workers of each version loop `run -w` on one
#     key while the test SIGKILLs holders; never two commands at once, every token given once
#     and rising, no run fails other than by its kill. upgrade_distance.sh runs it again with
#     every dblock at a distance.
source "$(dirname "$0")/lib.sh"

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

chaos chaos "$old" "$new"
finish

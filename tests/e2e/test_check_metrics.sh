#!/usr/bin/env bash
# Monitoring: `check` answers as a monitoring plugin (exit 0/1/2/3, one line with performance
# data), `metrics` prints the Prometheus text format (checked by `promtool check metrics` from
# Debian's prometheus package, and parsed by prom_parse.py to read the values back), and
# status/history print util-linux tables (-o, --raw, -n) that line up wide Unicode keys and
# show no holder for a free key.
source "$(dirname "$0")/lib.sh"

# plugin_line NAME EXPECTED_STATUS REGEX ARGS...: `dblock check ARGS` exits EXPECTED_STATUS and
# prints exactly one line matching REGEX whose performance data follows the guidelines
# ('label'=value[UOM];[warn];[crit];[min];[max], space separated).
plugin_line() {
  local name=$1 expected=$2 regex=$3 out rc=0
  shift 3
  out=$(dblock check "$@" 2>/dev/null) || rc=$?
  assert_eq "$name (exit status)" "$expected" "$rc"
  check "$name: one line matching /$regex/ (got: $out)" \
    bash -c '[ "$(printf "%s\n" "$1" | wc -l)" = 1 ] && [[ $1 =~ $2 ]]' _ "$out" "$regex"
  check "$name: performance data in the plugin format" python3 -c '
import re, sys
line = sys.argv[1]
if "|" in line:
    for item in line.split("|", 1)[1].split():
        assert re.fullmatch(r"(\x27[^\x27=]+\x27|[^\x27= ]+)=-?[0-9.]+(s|ms|us|%|B|KB|MB|TB|c)?(;-?[0-9.]*){0,4}", item), item
' "$out"
}

# --- check -------------------------------------------------------------------------------
# No lock database at all: UNKNOWN (the check cannot tell, and creates nothing); then make it.
if [ "$DBLOCK_TEST_BACKEND" = sqlite ]; then
  plugin_line "no lock database: UNKNOWN" 3 "^DBLOCK UNKNOWN - no lock database at " "$(key nodb)" --max-age 1h
fi
assert_status "init" 0 dblock init
k=$(key never)
plugin_line "never ran: CRITICAL" 2 "^DBLOCK CRITICAL - $k: never ran \| " "$k" --max-age 1h

k=$(key ok)
dblock run "$k" -- true
plugin_line "recent success: OK" 0 \
  "^DBLOCK OK - $k: last success .* ago \| last_success_age=[0-9.]+s;;3600\.000;0 last_exit=0 held=0 runs_ok=1 " \
  "$k" --max-age 1h
sleep 1.2
plugin_line "past --warn-age: WARNING" 1 "^DBLOCK WARNING - $k: .*--warn-age.* \| last_success_age=[0-9.]+s;1\.000;3600\.000;0 " \
  "$k" --max-age 1h --warn-age 1s
plugin_line "past --max-age: CRITICAL" 2 "^DBLOCK CRITICAL - $k: .*--max-age" "$k" --max-age 1s --warn-age 0.5s

k=$(key failed)
dblock run "$k" -- true
dblock run "$k" -- sh -c 'exit 3'
plugin_line "last run failed: CRITICAL even with a recent success" 2 \
  "^DBLOCK CRITICAL - $k: last run failed \(exit 3\) .* ago \| last_success_age=.* last_exit=3 held=0 runs_ok=1 runs_failed=1 " \
  "$k" --max-age 1h

if ! is_session_strategy; then
  k=$(key lost)
  lose_a_run "$k"
  plugin_line "last run lost: CRITICAL" 2 "^DBLOCK CRITICAL - $k: last run lost" "$k" --max-age 1h
fi

k=$(key ok)
plugin_line "no --max-age: UNKNOWN" 3 "^DBLOCK UNKNOWN - .*--max-age" "$k"
plugin_line "bad duration: UNKNOWN" 3 "^DBLOCK UNKNOWN - .*--max-age" "$k" --max-age soon
plugin_line "--warn-age above --max-age: UNKNOWN" 3 "^DBLOCK UNKNOWN - " "$k" --max-age 1m --warn-age 1h
plugin_line "no key: UNKNOWN" 3 "^DBLOCK UNKNOWN - " --max-age 1h
plugin_line "unknown option: UNKNOWN" 3 "^DBLOCK UNKNOWN - " "$k" --max-age 1h --bogus
plugin_line "database unusable: UNKNOWN" 3 "^DBLOCK UNKNOWN - " --dsn "nosuch://x" "$k" --max-age 1h
# A '|' in the key (a valid key) must not start the performance data early: the key's text
# would land there ("x=1: never ran" read as a label). It is shown as \x7c.
pipe_key="$(key pipe)|x=1"
plugin_line "a '|' in the key: escaped in the text" 2 "^DBLOCK CRITICAL - $(key pipe)\\\\x7cx=1: never ran \\| held=0 " \
  "$pipe_key" --max-age 1h

# --- metrics -----------------------------------------------------------------------------
held=$(key held)
start_bg holder dblock run "$held" -- sh -c "echo \$\$ >\"$E2E_TMP/held\"; exec sleep 30"
check "holder started" wait_for 10 test -s "$E2E_TMP/held"
odd=$(key 'say "hi" \ now')
dblock run "$odd" -- true

dblock metrics >"$E2E_TMP/metrics.prom"
command -v promtool >/dev/null || skip_or_fail "promtool is not installed (scripts/install-deps.sh: prometheus)"
check "promtool check metrics accepts the metrics of every key" eval 'promtool check metrics <"$E2E_TMP/metrics.prom"'
check "metrics of every key follow the text format" python3 "$DBLOCK_SOURCE_DIR/tests/e2e/prom_parse.py" \
  <"$E2E_TMP/metrics.prom"
python3 "$DBLOCK_SOURCE_DIR/tests/e2e/prom_parse.py" <"$E2E_TMP/metrics.prom" >"$E2E_TMP/samples"
# sample NAME LABELS: the value of one parsed sample (labels as prom_parse.py prints them).
sample() { N=$1 L=$2 awk '$1 == ENVIRON["N"] && substr($0, length($1) + 2, length(ENVIRON["L"]) + 1) == ENVIRON["L"] " " { print $NF }' "$E2E_TMP/samples"; }
ok=$(key ok)
failed=$(key failed)
never=$(key never)
assert_eq "ok: not held" 0 "$(sample dblock_lock_held "key=$ok")"
assert_eq "ok: last exit 0" 0 "$(sample dblock_last_exit_code "key=$ok")"
assert_eq "ok: one ok run" 1 "$(sample dblock_runs "key=$ok,outcome=ok")"
assert_eq "ok: no failed run" 0 "$(sample dblock_runs "key=$ok,outcome=failed")"
assert_eq "ok: last success = last finish" "$(sample dblock_last_finish_timestamp_seconds "key=$ok")" \
  "$(sample dblock_last_success_timestamp_seconds "key=$ok")"
check "ok: last start is a recent Unix time" python3 -c \
  'import sys, time; t = float(sys.argv[1]); assert abs(time.time() - t) < 600, t' \
  "$(sample dblock_last_start_timestamp_seconds "key=$ok")"
assert_eq "failed: last exit 3" 3 "$(sample dblock_last_exit_code "key=$failed")"
assert_eq "failed: runs by outcome" "1 1" \
  "$(sample dblock_runs "key=$failed,outcome=ok") $(sample dblock_runs "key=$failed,outcome=failed")"
assert_eq "held: held" 1 "$(sample dblock_lock_held "key=$held")"
check "held: a holder age" python3 -c 'import sys; assert 0 <= float(sys.argv[1]) < 600' \
  "$(sample dblock_lock_holder_age_seconds "key=$held")"
assert_eq "held: its token" "$(status_field "$held" token)" "$(sample dblock_lock_token "key=$held")"
assert_eq "held: no finished run yet" "" "$(sample dblock_last_exit_code "key=$held")"
assert_eq "a key with a quote and a backslash comes back intact" 1 "$(sample dblock_runs "key=$odd,outcome=ok")"
dblock metrics "$ok" "$never" "$ok" >"$E2E_TMP/two.prom"
check "metrics of two keys follow the text format" python3 "$DBLOCK_SOURCE_DIR/tests/e2e/prom_parse.py" <"$E2E_TMP/two.prom"
check "promtool check metrics accepts them" eval 'promtool check metrics <"$E2E_TMP/two.prom"'
assert_eq "metrics KEY...: only those keys, a key named twice once" 2 "$(grep -c '^dblock_lock_held{' "$E2E_TMP/two.prom")"
assert_eq "a key never taken: not held, token 0" "0 0" \
  "$(grep -F "{key=\"$never\"}" "$E2E_TMP/two.prom" | grep -E '^dblock_lock_(held|token)' | awk '{print $2}' | xargs)"
assert_status "metrics with an unusable database fails, printing nothing" 0 \
  bash -c "! dblock --dsn nosuch://x metrics >'$E2E_TMP/bad.prom' 2>/dev/null && ! test -s '$E2E_TMP/bad.prom'"

# --- status and history tables -----------------------------------------------------------
assert_eq "status of a free key shows no holder" "$ok free     " \
  "$(dblock status "$ok" --raw -n -o KEY,STATE,OWNER,HOST,PID,SINCE,AGE)"
read -r owner age <<<"$(dblock status "$held" --raw -n -o OWNER,AGE)"
check "status of a held key: its owner and how long it has held it ($owner, $age)" \
  test -n "$owner" -a -n "$age"
assert_eq "status -o in the order given, -n, --raw" "free $ok" "$(dblock status "$ok" -n --raw -o state,key)"
assert_eq "status header" "KEY STATE LAST-EXIT" "$(dblock status "$ok" --raw -o KEY,STATE,LAST-EXIT | head -1)"
assert_status "status -o with an unknown column" 64 dblock status -o KEY,NOPE
assert_eq "status --json still the documented document" "$ok free" \
  "$(dblock status "$ok" --json | json_field locks.0.key locks.0.state)"
assert_eq "history -o, -n, --raw" "failed 3" "$(dblock history "$failed" --limit 1 -n --raw -o OUTCOME,EXIT)"
assert_eq "history header" "KEY OUTCOME" "$(dblock history "$failed" --raw -o KEY,OUTCOME | head -1)"
assert_status "history -o with an unknown column" 64 dblock history -o NOPE
assert_eq "history --json still the documented document" "failed" \
  "$(dblock history "$failed" --json --limit 1 | json_field runs.0.outcome)"

# A key of double-width characters lines up with the others, measured in terminal cells.
wide=$(key '鍵ロック')
dblock run "$wide" -- true
for lang in C.UTF-8 C; do
  LC_ALL=$lang dblock status "$wide" "$ok" -o KEY,STATE,TOKEN >"$E2E_TMP/wide.$lang"
  check "wide Unicode key: columns line up (LC_ALL=$lang)" python3 -c '
import sys, unicodedata
cells = lambda s: sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
assert len(lines) == 3 and sys.argv[2] in lines[1], lines
starts = [cells(l[:l.index("STATE" if i == 0 else "free")]) for i, l in enumerate(lines)]
assert len(set(starts)) == 1, (starts, lines)
ends = [cells(l.rstrip()) for l in lines]
assert len(set(ends)) == 1, (ends, lines)
' "$E2E_TMP/wide.$lang" "$wide"
done
assert_eq "history of the wide key, raw: escaped as util-linux does" "$wide" \
  "$(dblock history "$wide" -n --raw -o KEY | python3 -c 'import sys; print(sys.stdin.read().strip().encode().decode("unicode_escape").encode("latin-1").decode())')"

finish

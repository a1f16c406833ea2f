#!/usr/bin/env bash
# The README's acquire / renew / release shell snippet, run exactly as written (taken from
# README.md: the ```sh block after the marker comment), under dash and under bash. Its
# do_step_1 / do_step_2 are test functions defined ahead of it. Checked per shell: a normal
# run releases the lock; a lock held elsewhere is a skip (exit 0, no step); a configuration
# or database error fails the script; SIGTERM during step 1 releases the lock at once; a
# renew that fails (the lease taken over during step 1) stops the script before step 2; a
# release --force during step 1 stops it too, and is told once (by renew, not again by the trap).
source "$(dirname "$0")/lib.sh"

marker='<!-- tests/e2e/once_shell_pattern.sh runs the next block under dash and bash -->'
snippet=$(awk -v m="$marker" '
  $0 == m { found = 1; next }
  found && !open && /^```sh$/ { open = 1; next }
  open && /^```$/ { exit }
  open { print }' "$DBLOCK_SOURCE_DIR/README.md")
if [ -z "$snippet" ]; then
  fail "README.md has no \`\`\`sh block after the line '$marker'"
  finish
fi
grep -q 'do_step_1' <<<"$snippet" && grep -q 'do_step_2' <<<"$snippet" ||
  fail "the README snippet no longer calls do_step_1 and do_step_2"

# The test's steps, set by MODE: each step appends a line to $STEPS. MODE=term: step 1 marks
# that it started, then works for up to 30 s (short commands: a shell runs a trap between
# commands, not during one). MODE=steal: step 1 lets another owner take the lease over.
script=$E2E_TMP/pattern.sh
cat >"$script" <<'STEPS'
do_step_1() {
  echo step1 >>"$STEPS"
  case $MODE in
    term)
      : >"$STEPS.in_step_1"
      i=0
      while [ "$i" -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
      ;;
    force)
      dblock release --force deploy >/dev/null 2>&1 || echo "force release failed" >>"$STEPS"
      ;;
    steal)
      dblock release --force deploy >/dev/null 2>&1 || echo "force release failed" >>"$STEPS"
      dblock acquire deploy --ttl 1m --owner thief >"$STEPS.thief" 2>&1 || echo "thief failed" >>"$STEPS"
      ;;
  esac
}
do_step_2() { echo "step2 $*" >>"$STEPS"; }
STEPS
printf '%s\n' "$snippet" >>"$script"

steps() { tr '\n' ' ' <"$STEPS" | sed 's/ $//'; }

for sh in dash bash; do
  export STEPS=$E2E_TMP/steps.$sh
  rm -f "$STEPS"* && : >"$STEPS"

  # 1. Normal run: both steps, exit 0, the lock free afterwards.
  rc=0
  MODE=normal "$sh" "$script" >/dev/null 2>"$E2E_TMP/err" || rc=$?
  assert_eq "$sh normal: exit status" 0 "$rc"
  case $(steps) in
    "step1 step2 --fence "[0-9]*) pass "$sh normal: both steps ran, step 2 with the token" ;;
    *) fail "$sh normal: steps were '$(steps)'" ;;
  esac
  check "$sh normal: the lock is free afterwards" is_free deploy

  # 2. Held elsewhere: a skip, exit 0, no step.
  : >"$STEPS"
  other=$(dblock acquire deploy --ttl 1m --owner other)
  rc=0
  MODE=normal "$sh" "$script" >/dev/null 2>"$E2E_TMP/err" || rc=$?
  assert_eq "$sh held elsewhere: exit status" 0 "$rc"
  assert_eq "$sh held elsewhere: no step ran" "" "$(steps)"
  assert_eq "$sh held elsewhere: still the other owner's" "$other" "$(status_field deploy token)"
  dblock release deploy --token "$other" >/dev/null

  # 3. A database that cannot be opened and a configuration error: the script fails, no step.
  for dsn in "sqlite:$E2E_TMP/no-such-dir/x.db" "redis://localhost/0"; do
    : >"$STEPS"
    rc=0
    DBLOCK_DSN=$dsn MODE=normal "$sh" "$script" >/dev/null 2>"$E2E_TMP/err" || rc=$?
    if [ "$rc" -ne 0 ]; then pass "$sh error ($dsn): exit status $rc"; else fail "$sh error ($dsn): exit status 0"; fi
    assert_eq "$sh error ($dsn): no step ran" "" "$(steps)"
  done

  # 4. SIGTERM during step 1: the lock is free within 2 s (the TTL is 2 min), exit non-zero.
  : >"$STEPS"
  start_bg pid env MODE=term "$sh" "$script"
  if wait_for 10 test -e "$STEPS.in_step_1"; then
    check "$sh term: held during step 1" is_held deploy
    kill -TERM "$pid"
    t0=$(now_ms)
    if wait_for 5 is_free deploy; then
      assert_between "$sh term: lock free soon after SIGTERM (ms)" 0 2000 $(($(now_ms) - t0))
    else
      fail "$sh term: lock still held 5 s after SIGTERM"
    fi
    wait_exit rc "$pid" 10
    if [ "$rc" != timeout ] && [ "$rc" -ne 0 ]; then pass "$sh term: exit status $rc"; else fail "$sh term: exit status $rc"; fi
    assert_eq "$sh term: step 2 did not run" "step1" "$(steps)"
  else
    fail "$sh term: step 1 never started: $(steps)"
  fi
  dblock release --force deploy >/dev/null 2>&1

  # 5. The lease taken over during step 1: renew fails, step 2 does not run, exit non-zero,
  # and the script leaves the new holder's lease alone.
  : >"$STEPS"
  rc=0
  MODE=steal "$sh" "$script" >/dev/null 2>"$E2E_TMP/err" || rc=$?
  if [ "$rc" -ne 0 ]; then pass "$sh lost renew: exit status $rc"; else fail "$sh lost renew: exit status 0"; fi
  assert_eq "$sh lost renew: step 2 did not run" "step1" "$(steps)"
  assert_eq "$sh lost renew: the new holder keeps the lock" "thief" "$(status_field deploy owner)"
  dblock release --force deploy >/dev/null 2>&1

  # 6. An operator's release --force during step 1: renew fails (76), step 2 does not run, and
  # what happened is said once: the trap's release of the token adds nothing (dblock(1), release).
  : >"$STEPS"
  rc=0
  MODE=force "$sh" "$script" >/dev/null 2>"$E2E_TMP/err" || rc=$?
  assert_eq "$sh force-released: exit status" 76 "$rc"
  assert_eq "$sh force-released: step 2 did not run" "step1" "$(steps)"
  sed 's/^/    | /' "$E2E_TMP/err"
  assert_eq "$sh force-released: one line on stderr" 1 "$(wc -l <"$E2E_TMP/err")"
  check "$sh force-released: it says the lock was released by another command" \
    grep -q "^dblock: 'deploy': the lock deploy was released at .* while token [0-9]* held it, not by this command: by \`dblock release --force\`" "$E2E_TMP/err"
done

finish

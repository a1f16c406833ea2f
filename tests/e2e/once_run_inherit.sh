#!/usr/bin/env bash
# What the command inherits from dblock's caller, as with flock(1) and exec: the signals the
# caller ignored stay ignored (`nohup dblock run ...` protects the job from SIGHUP), the
# caller's descriptors stay open (dblock's own are close-on-exec), and the DSN is in neither
# the command's environment nor its parent's (the guard's /proc/PID/environ). What run adds
# describes the run under names no dblock reads as a setting (once_run_nested.sh and
# once_postgres_run_nested.sh: a dblock inside the command).
source "$(dirname "$0")/lib.sh"

k=$(key inherit)
out=$E2E_TMP/out

# nohup: SIGHUP is ignored by the caller, so neither dblock nor the command dies of it.
nohup dblock run "$k" -- sh -c 'sleep 1; echo survived' >"$out" 2>&1 &
pid=$!
remember_pid $pid
sleep 0.4
kill -HUP $pid
wait_exit rc $pid 10
assert_eq "nohup: a SIGHUP to dblock does not end the run" 0 "$rc"
check "nohup: the command ran to its end" grep -qx survived "$out"

# The same without nohup: SIGHUP is forwarded, the command dies of it (128+1).
dblock run "$k" -- sleep 5 &
pid=$!
remember_pid $pid
sleep 0.4
kill -HUP $pid
wait_exit rc $pid 10
assert_eq "no nohup: SIGHUP reaches the command" 129 "$rc"

# An ignored SIGINT is still ignored in the command (bit 1 of SigIgn); SIGPIPE, which the caller
# did not ignore, is not (bit 12), though dblock's guard ignores it for itself.
sigign=$( (trap '' INT; dblock run "$k" -- sh -c 'grep ^SigIgn: /proc/$$/status') | awk '{print $2}')
check "an ignored SIGINT stays ignored in the command (SigIgn $sigign)" \
  python3 -c "import sys; sys.exit(0 if int('$sigign', 16) & (1 << 1) else 1)"
check "SIGPIPE is not ignored in the command (SigIgn $sigign)" \
  python3 -c "import sys; sys.exit(0 if not int('$sigign', 16) & (1 << 12) else 1)"

# The caller's descriptor 3 reaches the command, and nothing else of dblock's does.
dblock run "$k" -- sh -c 'echo hi >&3' 3>"$E2E_TMP/fd3"
assert_eq "a descriptor the caller passes is open in the command" 0 "$?"
check "the command wrote through it" grep -qx hi "$E2E_TMP/fd3"
# The same command without dblock shows what the caller passes (the harness may pass more).
list_fds='cd /proc/$$/fd && echo *'
direct=$(sh -c "$list_fds" 3>/dev/null 4</dev/null)
fds=$(dblock run "$k" -- sh -c "$list_fds" 3>/dev/null 4</dev/null)
assert_eq "the command has the caller's descriptors and no others" "$direct" "$fds"

# The DSN is gone from the guard's environment block (the command's parent).
guard_env=$(DBLOCK_DSN=$DBLOCK_DSN dblock run "$k" -- sh -c 'tr "\0" "\n" </proc/$PPID/environ' | grep '^DBLOCK_DSN=')
assert_eq "the guard's /proc/PID/environ has no DSN value" "DBLOCK_DSN=" "$guard_env"
cmd_env=$(dblock run "$k" -- env | grep -c '^DBLOCK_DSN=')
assert_eq "the command's environment has no DBLOCK_DSN" 0 "$cmd_env"
run_env=$(env -u DBLOCK_STRATEGY dblock run "$k" -- env | grep -E '^DBLOCK_(RUN_)?STRATEGY=')
assert_eq "the run's strategy is DBLOCK_RUN_STRATEGY, never the setting DBLOCK_STRATEGY" \
  "DBLOCK_RUN_STRATEGY=$DBLOCK_STRATEGY" "$run_env"
finish

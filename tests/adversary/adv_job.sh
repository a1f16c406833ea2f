#!/usr/bin/env bash
# The adversary farm's job (tests/adversary/adversary.py): adv_job.sh DIR KEY COUNT SECONDS [COMMAND...]
# Checks, with the kernel's flock(2) and at the moment it starts, what the farm's oracle
# promises, and writes any breach to DIR/over (one line each):
#   - no other job's process tree is alive in its slot (DBLOCK_SLOT, 0 for a plain lock):
#     each job locks a marker file DIR/KEY.slot.N.tree.TOKEN.FENCED.RUN for its whole tree
#     (children inherit the descriptor), so the kernel drops the lock only when every
#     process of the tree is dead, however it died;
#   - no job of KEY runs under another slot count (COUNT: the job's --slots, 0 for a plain
#     lock; DIR/KEY.counts lists every count drawn for KEY in the round), and its slot is
#     below its count;
#   - its fencing token was not given to another run, and is greater than the last one
#     started in its slot.
# A step of the shell pattern (ADV_FENCED=1: acquire, step, renew, step) holds no guard: a
# script stopped past its lease runs its step late, and only the token protects the
# resource. So the job plays a fenced resource there: a step whose token is below the
# highest already started for KEY is turned away (DIR/fenced), and a later holder may start
# beside such a stale step; never beside a live `run` job or a current step.
# Then it logs `start KEY TOKEN SLOT COUNT NS PID RUN`, runs COMMAND (a nested dblock) or
# sleeps SECONDS, and logs `end KEY TOKEN NS PID done|term RUN`. Times are read with the
# wall clock unfaked (a host's dblock may run under libfaketime; the oracle must not).
dir=$1 key=$2 count=$3 secs=$4
shift 4
umask 0  # the oracle's files are shared by the hosts' users
now() { LD_PRELOAD='' FAKETIME='' date +%s%N; }
tok=${DBLOCK_TOKEN:-?} slot=${DBLOCK_SLOT:-0} run=${ADV_RUN:-?} way=${ADV_WAY:-?} fenced=${ADV_FENCED:-0}
breach() { echo "$* (key $key, token $tok, slot $slot, count $count, run $run, $way, at $(now))" >>"$dir/over"; }
case $tok in
  '' | *[!0-9]*)
    breach "no DBLOCK_TOKEN"
    tok=0
    ;;
esac
[ "$count" = 0 ] || [ "$slot" -lt "$count" ] || breach "slot $slot is not below the slot count"

# The key's checks one job at a time (a mutex held for milliseconds, never across the run).
exec {m}>>"$dir/$key.check"
flock -x "$m"
read -r max maxrun 2>/dev/null <"$dir/$key.max" || max=0
if [ "$fenced" = 1 ] && [ "$tok" -lt "$max" ] && [ "$run" != "${maxrun:-}" ]; then
  echo "fenced $key token $tok below $max (run $run, at $(now))" >>"$dir/fenced"
  exit 0
fi
for f in "$dir/$key.slot.$slot.tree".*; do
  [ -e "$f" ] || continue
  exec {o}>>"$f"
  if flock -n "$o"; then  # its tree is dead
    rm -f "$f"
    exec {o}>&-
    continue
  fi
  exec {o}>&-
  IFS=. read -r otok ofenced orun <<<"${f##*.tree.}"
  [ "$ofenced" = 1 ] && [ "$otok" -lt "$tok" ] && continue  # a stale step, turned away by its token
  breach "slot already held by a live process tree: run ${orun//_/.}, token $otok$([ "$ofenced" = 1 ] && echo ', a shell step')$(cat "$dir/$key.who.$otok" 2>/dev/null)"
done
exec {s}>>"$dir/$key.slot.$slot.tree.$tok.$fenced.${run//./_}"
flock -x "$s"
echo ", $way, count $count" >"$dir/$key.who.$tok"

exec {c}>>"$dir/$key.count.$count"
flock -s "$c"
for other in $(cat "$dir/$key.counts" 2>/dev/null); do
  [ "$other" = "$count" ] && continue
  exec {o}>>"$dir/$key.count.$other"
  if flock -x -n "$o"; then flock -u "$o"; else breach "runs while a job with slot count $other runs"; fi
  exec {o}>&-
done
if [ "$tok" != 0 ]; then
  read -r last lastrun 2>/dev/null <"$dir/$key.slot.$slot.last" || last=0
  if [ "$run" != "${lastrun:-}" ] && [ "$tok" -le "$last" ]; then
    breach "token $tok is not greater than the last started in this slot ($last, run ${lastrun:-?})"
  fi
  if grep -q "^$tok " "$dir/$key.tokens" 2>/dev/null && ! grep -qx "$tok $run" "$dir/$key.tokens"; then
    breach "token $tok was given twice (also to run $(grep "^$tok " "$dir/$key.tokens" | head -n 1 | cut -d' ' -f2))"
  fi
  echo "$tok $run" >"$dir/$key.slot.$slot.last"
  echo "$tok $run" >>"$dir/$key.tokens"
  [ "$tok" -gt "$max" ] && echo "$tok $run" >"$dir/$key.max"
fi
echo "start $key $tok $slot $count $(now) $$ $run" >>"$dir/log"
flock -u "$m"
exec {m}>&-

trap 'echo "end $key $tok $(now) $$ term $run" >>"$dir/log"; exit 143' TERM
if [ $# -gt 0 ]; then
  "$@" &
else
  sleep "$secs" &
fi
wait $!
rc=$?
echo "end $key $tok $(now) $$ done $run" >>"$dir/log"
exit "$rc"

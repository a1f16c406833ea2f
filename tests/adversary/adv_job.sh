#!/usr/bin/env bash
# The adversary farm's job (tests/adversary/adversary.py): adv_job.sh DIR KEY COUNT SECONDS [COMMAND...]
# Checks, with the kernel's flock(2) and at the moment it starts, what the farm's oracle
# promises, and writes any breach to DIR/over (one line each):
#   - its slot (DBLOCK_SLOT, 0 for a plain lock) is not held by another job's process tree:
#     the file DIR/KEY.slot.N is locked for this job's whole tree (children inherit the
#     descriptor), so the kernel drops it only when every process of the tree is dead;
#   - no job of KEY runs under another slot count (COUNT: the job's --slots, 0 for a plain
#     lock; DIR/KEY.counts lists every count drawn for KEY in the round), and its slot is
#     below its count;
#   - its fencing token is new for KEY and greater than the last one started in its slot.
# Then it logs `start KEY TOKEN SLOT COUNT NS PID RUN`, runs COMMAND (a nested dblock) or
# sleeps SECONDS, and logs `end KEY TOKEN NS PID done|term RUN`. Times are read with the
# wall clock unfaked (a host's dblock may run under libfaketime; the oracle must not).
dir=$1 key=$2 count=$3 secs=$4
shift 4
umask 0  # the oracle's files are shared by the hosts' users
now() { LD_PRELOAD='' FAKETIME='' date +%s%N; }
tok=${DBLOCK_TOKEN:-?} slot=${DBLOCK_SLOT:-0} run=${ADV_RUN:-?} way=${ADV_WAY:-?}
breach() { echo "$* (key $key, token $tok, slot $slot, count $count, run $run, $way, at $(now))" >>"$dir/over"; }

exec {s}>>"$dir/$key.slot.$slot"
if ! flock -n "$s"; then
  breach "slot already held by a live process tree: $(cat "$dir/$key.slot.$slot.who" 2>/dev/null)"
fi
echo "run $run, $way, count $count, token $tok" >"$dir/$key.slot.$slot.who"
[ "$count" = 0 ] || [ "$slot" -lt "$count" ] || breach "slot $slot is not below the slot count"

# The key's checks one job at a time (a mutex held for milliseconds, never across the run).
exec {m}>>"$dir/$key.check"
flock -x "$m"
exec {c}>>"$dir/$key.count.$count"
flock -s "$c"
for other in $(cat "$dir/$key.counts" 2>/dev/null); do
  [ "$other" = "$count" ] && continue
  exec {o}>>"$dir/$key.count.$other"
  if flock -x -n "$o"; then flock -u "$o"; else breach "runs while a job with slot count $other runs"; fi
  exec {o}>&-
done
if [ "$tok" = "?" ]; then
  breach "no DBLOCK_TOKEN"
else
  read -r last lastrun 2>/dev/null <"$dir/$key.slot.$slot.last" || last=0
  if [ "$run" != "${lastrun:-}" ] && [ "$tok" -le "$last" ]; then
    breach "token $tok is not greater than the last started in this slot ($last, run ${lastrun:-?})"
  fi
  if [ "$run" != "${lastrun:-}" ] && grep -qx "$tok" "$dir/$key.tokens" 2>/dev/null; then
    breach "token $tok was given twice"
  fi
  echo "$tok $run" >"$dir/$key.slot.$slot.last"
  echo "$tok" >>"$dir/$key.tokens"
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

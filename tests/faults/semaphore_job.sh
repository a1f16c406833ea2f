#!/usr/bin/env bash
# A job for the semaphore chaos test: semaphore_job.sh DIR SLOTS SECONDS
# The counting-semaphore oracle: SLOTS files DIR/slot.I, each taken with flock(2) for the
# job's whole life (its children inherit the descriptor, so the lock goes only when the whole
# process tree is dead, whichever way it dies: the kernel drops it, even after SIGKILL). A job
# that finds every file locked by others is a run beyond SLOTS: it says so in DIR/over.
# It logs to DIR/log as oracle_job.sh does, plus its DBLOCK_SLOT:
#   start TOKEN NS PID SLOT        end TOKEN NS PID done
dir=$1 slots=$2 secs=$3
unset LD_PRELOAD FAKETIME
now() { date +%s%N; }
got=
for ((i = 0; i < slots; i++)); do
  exec {fd}>"$dir/slot.$i"
  if flock -n "$fd"; then
    got=$i
    break
  fi
  exec {fd}>&-
done
[ -n "$got" ] || echo "over ${DBLOCK_TOKEN:-?} $(now) $$ slot ${DBLOCK_SLOT:-?}" >>"$dir/over"
echo "start ${DBLOCK_TOKEN:-?} $(now) $$ ${DBLOCK_SLOT:-?}" >>"$dir/log"
sleep "$secs"
echo "end ${DBLOCK_TOKEN:-?} $(now) $$ done" >>"$dir/log"

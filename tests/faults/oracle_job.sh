#!/usr/bin/env bash
# A job for the fault oracle: oracle_job.sh LOG SECONDS [PIDFILE]
# Logs its start and end (tests/faults/lib.sh says the format) and exits 0 after SECONDS, or
# 143 on SIGTERM. PIDFILE, when given, receives the pids of itself and its helpers.
# The wall clock is read with LD_PRELOAD and FAKETIME removed, so a faked dblock cannot fake
# the oracle's times.
log=$1 secs=$2 pidfile=${3:-}
unset LD_PRELOAD FAKETIME
now() { date +%s%N; }
echo "start ${DBLOCK_TOKEN:-?} $(now) $$" >>"$log"
trap 'echo "end ${DBLOCK_TOKEN:-?} $(now) $$ term" >>"$log"; exit 143' TERM
sleep "$secs" &
[ -n "$pidfile" ] && echo "$$ $!" >>"$pidfile"
wait $!
echo "end ${DBLOCK_TOKEN:-?} $(now) $$ done" >>"$log"

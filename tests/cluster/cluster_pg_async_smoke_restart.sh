#!/usr/bin/env bash
# Patroni in its default asynchronous mode, lease strategy, over the multi-host DSN.
# smoke: sequential runs reach the leader, tokens increase.
# whole-cluster restart: both members stop (the replica first) and start again; the runs after
# it go on with greater tokens. Patroni starts the old leader as a replica and promotes it, on a
# new timeline: dblock cannot tell that from a failover, so the failover lock-delay (the longest
# TTL recorded, 30 s) holds the first run back; the runs wait it out (-w), and doctor shows it.
CLUSTER_KIND=pg-async
source "$(dirname "$0")/lib.sh"

smoke "pg-async" 3
mark restart
check "the whole cluster restarts" cluster_ctl restart
echo "# the cluster restarted in $(($(now_ms) - $(figure restart))) ms"
mark after_restart
smoke_wait=60 smoke "pg-async" 2
echo "# the first run after the restart started within $(($(now_ms) - $(figure after_restart))) ms (both runs done)"
dblock doctor 2>&1 | sed -n 's/^/    doctor: /; /failover/p'
finish

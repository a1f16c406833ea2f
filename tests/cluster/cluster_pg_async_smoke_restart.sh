#!/usr/bin/env bash
# Patroni in its default asynchronous mode, lease strategy, over the multi-host DSN.
# smoke: sequential runs reach the leader, tokens increase.
# whole-cluster restart: both members stop (the replica first) and start again; the runs after
# it go on with greater tokens.
CLUSTER_KIND=pg-async
source "$(dirname "$0")/lib.sh"

smoke "pg-async" 3
mark restart
check "the whole cluster restarts" cluster_ctl restart
echo "# the cluster restarted in $(($(now_ms) - $(figure restart))) ms"
smoke "pg-async" 2
finish

#!/usr/bin/env bash
# The throwaway servers (scripts/test-servers.sh, scripts/test-cluster.sh, the bench's etcd)
# get their ports from one free_port (scripts/lib/ports.sh), which picks them below the
# kernel's ephemeral range: a port from that range, checked free and closed, can be taken as
# the local port of one of the tests' outgoing connections before the server binds it, and the
# server then does not start. Checked: no script picks a port of its own, and 10 picks are each
# free and below the range.
set -u
top=${1:-${DBLOCK_SOURCE_DIR:?usage: free_port.sh SOURCE_DIR}}
status=0

if hits=$(grep -rnE '^[[:space:]]*free_port\(\)' "$top/scripts" "$top/tests" | grep -v "^$top/scripts/lib/ports.sh:"); then
  echo "a free_port of its own (use scripts/lib/ports.sh):"
  echo "$hits"
  status=1
fi

# shellcheck source=../../scripts/lib/ports.sh
. "$top/scripts/lib/ports.sh"
low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range)
for _ in $(seq 10); do
  port=$(free_port) || { echo "free_port failed"; status=1; break; }
  if ! [[ $port =~ ^[0-9]+$ ]] || ((port < 1024 || port >= low)); then
    echo "free_port gave $port: not between 1024 and the ephemeral range's start ($low)"
    status=1
    break
  fi
  if ! python3 -c 'import socket, sys; s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1])))' "$port" 2>/dev/null; then
    echo "free_port gave $port, which is taken"
    status=1
    break
  fi
done
[ "$status" -ne 0 ] || echo "ok: one free_port, 10 picks free and below $low"
exit "$status"

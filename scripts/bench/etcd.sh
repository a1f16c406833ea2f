# shellcheck shell=bash
# The `etcdctl lock` peer: a one-member etcd this bench starts on 127.0.0.1 (two free ports, a
# data directory in $tmp), stopped at exit by its PID. Sourced.

. "$here/lib/ports.sh"

# etcd_start: sets etcd_endpoint (empty, with a row saying why, when etcd cannot run).
etcd_start() {
  etcd_endpoint=""
  if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
    fail_row peers "etcd" "no etcd/etcdctl (apt-get install etcd-server etcd-client)"
    return 0
  fi
  local client peer pid
  client=$(free_port) peer=$(free_port)
  export ETCDCTL_API=3
  etcd --name bench --data-dir "$tmp/etcd" \
    --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "bench=http://127.0.0.1:$peer" >"$tmp/etcd.log" 2>&1 &
  pid=$!
  bg_pids+=("$pid")
  if ! wait_for 20 etcdctl --endpoints="http://127.0.0.1:$client" endpoint health >/dev/null 2>&1; then
    fail_row peers "etcd" "etcd did not come up: $(tail -n 1 "$tmp/etcd.log")"
    kill "$pid" 2>/dev/null || true
    return 0
  fi
  etcd_endpoint="http://127.0.0.1:$client"
}

#!/usr/bin/env bash
# Installs every Debian 12 package that building, testing and benchmarking dblock needs.
# Idempotent. `--check` only reports (exit 1) whether something is missing.
set -euo pipefail

packages=(
  # build
  g++ cmake ninja-build pkg-config
  libcli11-dev doctest-dev nlohmann-json3-dev
  libsqlite3-dev default-libmysqlclient-dev libpq-dev
  libsmartcols-dev  # status and history tables (util-linux libsmartcols)
  # tests: throwaway servers, clients, and the tools the end-to-end scripts use
  mariadb-server mariadb-client postgresql postgresql-client sqlite3 faketime
  python3 procps util-linux coreutils locales strace
  # the terminal tests (the waiter's line, completion in bash, zsh and fish below): a real
  # terminal whose screen they read (tmux capture-pane)
  tmux
  # the TLS tests: the CA and certificates of the test servers (scripts/test-servers.sh)
  openssl
  # PgBouncer in transaction pooling in front of the test PostgreSQL (README: lease works there)
  pgbouncer
  # the cluster tests (scripts/test-cluster.sh): Patroni with etcd (etcd-server, above) over two
  # PostgreSQL members, and a three-node MariaDB Galera cluster (galera-4; rsync and ss for its SST)
  patroni galera-4 rsync iproute2
  # the --log syslog tests: rsyslogd on a private socket (tests/e2e/test_log_sinks.sh)
  rsyslog
  # benchmarks (scripts/bench.sh): peers etcd/etcdctl, the handoff chart, fsync counts (strace,
  # above), peak RSS (GNU time); hyperfine for ad-hoc comparisons
  etcd-server etcd-client gnuplot-nox time hyperfine
  # where a run's time goes (docs/performance.md): perf stat and perf record, and gdb for which
  # call a system call comes from
  linux-perf gdb
  # packaging (scripts/build-packages.sh, tests/e2e/once_packages.sh): cpack's DEB generator needs
  # dpkg-dev (dpkg-shlibdeps); the man page lint, lintian, and the shells whose completions ship
  dpkg-dev fakeroot lintian mandoc man-db bash-completion zsh fish
  # `dblock metrics` is checked with promtool, which Debian ships only in the prometheus package
  prometheus
)

missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done

# The PostgreSQL conformance cell makes the test server speak German (lc_messages) to prove
# errors are classified by SQLSTATE; the server needs the OS locale for that.
has_locale() { locale -a 2>/dev/null | grep -qix 'de_DE\.utf-\?8'; }

if [ "${1:-}" = "--check" ]; then
  has_locale || missing+=("locale:de_DE.UTF-8")
  if [ ${#missing[@]} -gt 0 ]; then
    echo "missing packages: ${missing[*]}" >&2
    exit 1
  fi
  exit 0
fi

sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
# policy-rc.d keeps the packaged services from starting: tests run their own throwaway servers.
"${sudo[@]}" apt-get install -y --no-install-recommends "${packages[@]}"
has_locale || "${sudo[@]}" localedef -i de_DE -f UTF-8 de_DE.UTF-8

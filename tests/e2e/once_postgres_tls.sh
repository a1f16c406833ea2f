#!/usr/bin/env bash
# dblock over TLS on PostgreSQL: sslmode=verify-full, sslrootcert, a client certificate
# (clientcert=verify-full in pg_hba.conf); what is checked: tests/e2e/tls_checks.sh.
export DBLOCK_TEST_TLS=1
source "$(dirname "$0")/../faults/lib.sh"
PLAIN_DSN="$E2E_SQL_DSN?sslmode=disable"
# PgBouncer of the test servers offers no TLS.
[ -n "${DBLOCK_TEST_PGBOUNCER_DSN:-}" ] || skip_or_fail "DBLOCK_TEST_PGBOUNCER_DSN is not set"
NO_TLS_DSN="$DBLOCK_TEST_PGBOUNCER_DSN?sslmode=verify-full&sslrootcert=${DBLOCK_TEST_TLS_DIR:-}/ca.crt"
OTHER_NAME=localhost  # 127.0.0.1, a name the certificate lacks
source "$(dirname "$0")/tls_checks.sh"
finish

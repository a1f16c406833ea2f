#pragma once
// postgres://... and postgresql://... (dblock(1), DSN): libpq parses the URI itself, so every
// libpq parameter works (sslmode, host=/socket dir, passfile, ...); dblock only checks it early.

#include "backends/common/dsn.hpp"

namespace dblock::postgres {

/// ErrorKind::config, without the password, when libpq cannot parse the DSN.
Result<void> check_postgres_dsn(const Dsn& dsn);

}  // namespace dblock::postgres

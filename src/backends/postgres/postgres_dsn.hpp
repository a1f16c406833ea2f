#pragma once
// postgres://... and postgresql://... (dblock(1), DSN): libpq parses the URI itself, so every
// libpq parameter works (sslmode, host=/socket dir, passfile, ...); dblock only checks it early.

#include <libpq-fe.h>

#include <memory>
#include <string_view>

#include "backends/common/dsn.hpp"

namespace dblock::postgres {

struct ConninfoFree {
  void operator()(PQconninfoOption* o) const { PQconninfoFree(o); }
};
using Conninfo = std::unique_ptr<PQconninfoOption, ConninfoFree>;

/// libpq's parse of the DSN; ErrorKind::config, without the password, when it cannot parse it.
Result<Conninfo> parse_postgres_dsn(const Dsn& dsn);
/// The same, and the scheme, for the registry.
Result<void> check_postgres_dsn(const Dsn& dsn);

/// The value of `keyword` in parsed or used connection options; nullptr when unset or empty.
const char* conninfo_value(const PQconninfoOption* options, std::string_view keyword);

/// libpq messages end in newlines and may span lines; one line for our messages.
std::string one_line(std::string_view message);

}  // namespace dblock::postgres

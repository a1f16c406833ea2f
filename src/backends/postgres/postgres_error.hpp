#pragma once
// The one place where PostgreSQL's SQLSTATEs and libpq failures become ErrorKinds.

#include <libpq-fe.h>

#include <string_view>

#include "core/error.hpp"

namespace dblock::postgres {

/// busy / connection / config / other for a five-character SQLSTATE.
ErrorKind kind_for_sqlstate(std::string_view sqlstate);

/// The error a failed statement result carries; `where` is the redacted DSN.
Error statement_error(const PGresult* result, PGconn* conn, std::string_view where);

/// The error of a connection attempt that failed (no SQLSTATE is available there, so the
/// server's message decides between config: credentials, database; and connection).
Error connect_error(PGconn* conn, std::string_view where);

/// libpq messages end in newlines and may span lines; one line for our messages.
std::string one_line(std::string_view message);

}  // namespace dblock::postgres

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

/// What a connection attempt got to, for a failure libpq gives no SQLSTATE for.
struct ConnectProgress {
  bool reached_server = false;  // a TCP/socket connection was made
  bool ssl_required = false;    // sslmode require, verify-ca or verify-full
};

/// The error of a connection attempt that failed: the server's SQLSTATE when it sent one
/// (class 28, 3D000...: config; 53300, 57P03: connection), else what libpq tells
/// structurally: a password was asked for and none given, or SSL was demanded and the server
/// cannot do it (config); otherwise the server was not reached or dropped us (connection).
/// Error::overloaded for 53300 (too many connections) and for a connection the server
/// accepted and then dropped without an SQLSTATE. Never the message text, which a server
/// translates.
Error connect_error(PGconn* conn, std::string_view where, const ConnectProgress& progress);

}  // namespace dblock::postgres

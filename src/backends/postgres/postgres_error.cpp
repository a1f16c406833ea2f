// SQLSTATE -> ErrorKind (SOCI's idea: a few portable categories, mapped in one file).
#include "backends/postgres/postgres_error.hpp"

#include <string>

namespace dblock::postgres {

ErrorKind kind_for_sqlstate(std::string_view s) {
  if (s.size() != 5) return ErrorKind::other;
  std::string_view cls = s.substr(0, 2);
  // Someone else holds it: NOWAIT / lock_timeout refused, a deadlock victim, a serialization
  // conflict, or (txn-insert) a unique violation after the other side committed its row.
  if (s == "55P03" || s == "40P01" || s == "40001" || s == "23505") return ErrorKind::busy;
  // Server going away, connection trouble, cancelled statement, out of resources.
  if (cls == "08" || s == "57P01" || s == "57P02" || s == "57P03" || s == "57P05" || s == "57014" || cls == "53" ||
      cls == "58" || s == "25P03")
    return ErrorKind::connection;
  // Credentials, unknown database, missing privileges or tables/columns: the operator must act.
  if (cls == "28" || s == "3D000" || s == "42501" || s == "42P01" || s == "42703" || s == "3F000")
    return ErrorKind::config;
  return ErrorKind::other;
}

std::string one_line(std::string_view message) {
  std::string out;
  for (char c : message) {
    if (c == '\n' || c == '\r' || c == '\t') {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

Error statement_error(const PGresult* result, PGconn* conn, std::string_view where) {
  const char* state = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  std::string text = result ? PQresultErrorMessage(result) : "";
  if (text.empty() && conn) text = PQerrorMessage(conn);
  ErrorKind kind = state ? kind_for_sqlstate(state) : ErrorKind::other;
  if (!state && conn && PQstatus(conn) == CONNECTION_BAD) kind = ErrorKind::connection;
  std::string msg = "postgres " + std::string(where) + ": " + one_line(text);
  if (state) msg += " (SQLSTATE " + std::string(state) + ")";
  return Error{kind, msg};
}

Error connect_error(PGconn* conn, std::string_view where) {
  std::string text = conn ? one_line(PQerrorMessage(conn)) : std::string("out of memory");
  ErrorKind kind = ErrorKind::connection;
  // libpq gives no SQLSTATE for a refused connection; the server's FATAL text decides.
  for (std::string_view config_sign : {"password authentication failed", "authentication failed",
                                       "no password supplied", "does not exist", "no pg_hba.conf entry",
                                       "permission denied", "invalid connection option",
                                       "SSL is not enabled", "server does not support SSL"})
    if (text.find(config_sign) != std::string::npos) kind = ErrorKind::config;
  return Error{kind, "cannot connect to " + std::string(where) + ": " + text};
}

}  // namespace dblock::postgres

// SQLSTATE -> ErrorKind: a few portable categories, mapped in one file.
#include "backends/postgres/postgres_connection.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "backends/postgres/postgres_dsn.hpp"

namespace dblock::postgres {
namespace {

ErrorKind kind_for_sqlstate(std::string_view s) {
  if (s.size() != 5) return ErrorKind::other;
  std::string_view cls = s.substr(0, 2);
  // Someone else holds it: NOWAIT / lock_timeout refused (lock_not_available: the statement
  // took nothing), a deadlock victim, a serialization conflict, or (txn-insert) a unique
  // violation after the other side committed its row.
  if (s == "55P03") return ErrorKind::wait_ended;
  if (s == "40P01" || s == "40001" || s == "23505") return ErrorKind::busy;
  // No such table (42P01) or column (42703), or ON CONFLICT (name) found no unique key on
  // exactly name (42P10): the schema is missing or not dblock's (the schema check says which).
  if (s == "42P01" || s == "42703" || s == "42P10") return ErrorKind::schema_missing;
  if (s == "42501") return ErrorKind::denied;  // insufficient_privilege
  // Server going away, connection trouble, cancelled statement, out of resources.
  if (cls == "08" || s == "57P01" || s == "57P02" || s == "57P03" || s == "57P05" || s == "57014" || cls == "53" ||
      cls == "58" || s == "25P03")
    return ErrorKind::connection;
  // Credentials, unknown database, missing privileges or tables/columns: the operator must act.
  if (cls == "28" || s == "3D000" || s == "3F000")
    return ErrorKind::config;
  return ErrorKind::other;
}

// Where a password can come from, for a server that asked for one when none was given
// (PQconnectionNeedsPassword): dblock's DSN sources, and libpq's password file under the name
// libpq itself used (PGPASSFILE, passfile=, else ~/.pgpass), with the line it would look for.
// The password itself is never shown.
std::string password_hint(PGconn* conn, std::string_view dsn) {
  std::string passfile, service;
  if (PQconninfoOption* opts = PQconninfo(conn)) {
    for (PQconninfoOption* o = opts; o->keyword; ++o)
      if (std::string_view(o->keyword) == "passfile" && o->val) passfile = o->val;
    PQconninfoFree(opts);
  }
  // libpq keeps no service in the connection: the DSN's service=, else PGSERVICE.
  if (PQconninfoOption* opts = PQconninfoParse(std::string(dsn).c_str(), nullptr)) {
    for (PQconninfoOption* o = opts; o->keyword; ++o)
      if (std::string_view(o->keyword) == "service" && o->val) service = o->val;
    PQconninfoFree(opts);
  }
  if (const char* env = std::getenv("PGSERVICE"); service.empty() && env) service = env;
  if (passfile.empty()) passfile = "~/.pgpass";
  auto part = [](const char* v) { return std::string(v && *v ? v : "*"); };
  // A service (service= or PGSERVICE) may carry the password in its section too.
  const std::string in_service =
      service.empty() ? "" : ", or password=PASSWORD in the [" + service +
                                 "] section of the service file (PGSERVICEFILE, else ~/.pg_service.conf; mode 0600)";
  return "; the server wants a password for user " + part(PQuser(conn)) +
         " and none was given: put it in the DSN, in a file that --dsn-file or DBLOCK_DSN_FILE names or in a systemd "
         "unit's credential dblock-dsn (LoadCredential=dblock-dsn:FILE, read from $CREDENTIALS_DIRECTORY) (mode 0600; "
         "never on the command line, where ps shows it), or add the line " +
         part(PQhost(conn)) + ":" + part(PQport(conn)) + ":" + part(PQdb(conn)) + ":" + part(PQuser(conn)) +
         ":PASSWORD to libpq's password file " + passfile + " (mode 0600; PGPASSFILE or passfile= names another)" +
         in_service;
}

}  // namespace

Error statement_error(const PGresult* result, PGconn* conn, std::string_view where) {
  const char* state = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  std::string text = result ? PQresultErrorMessage(result) : "";
  if (text.empty() && conn) text = PQerrorMessage(conn);
  ErrorKind kind = state ? kind_for_sqlstate(state) : ErrorKind::other;
  if (!state && conn && PQstatus(conn) == CONNECTION_BAD) kind = ErrorKind::connection;
  std::string msg = "postgres " + std::string(where) + ": " + one_line(text);
  if (state) msg += " (SQLSTATE " + std::string(state) + ")";
  return Error{kind, msg, 0, state ? state : ""};
}

Error connect_error(PGconn* conn, std::string_view where, bool reached_server, bool ssl_required) {
  if (!conn) return Error{ErrorKind::connection, "cannot connect to " + std::string(where) + ": out of memory"};
  // libpq keeps no result for a refused connection, but with PQERRORS_VERBOSE (set by
  // Connection while connecting) it writes the server's SQLSTATE into its message as
  // "SEVERITY:  CODE: text": the code is taken from that layout, never from the words, which
  // the server translates (lc_messages). The code leaves the human text, and so do the
  // verbose lines that follow it ("WORD:  ..." such as LOCATION: the server's source file).
  std::string text, sqlstate;
  bool skipping = false;
  std::string_view all = PQerrorMessage(conn);
  for (std::size_t start = 0; start < all.size();) {
    const std::size_t nl = std::min(all.find('\n', start), all.size());
    const std::string_view line = all.substr(start, nl - start);
    start = nl + 1;
    const std::size_t sep = line.find(":  ");
    const std::string_view code = sep == std::string_view::npos ? "" : line.substr(sep + 3, 5);
    if (code.size() == 5 && line.substr(sep + 8, 2) == ": " &&
        std::ranges::all_of(code, [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z'); })) {
      sqlstate = code;
      text += std::string(line.substr(0, sep + 3)) + std::string(line.substr(sep + 10)) + "\n";
      skipping = true;
    } else if (!skipping || sep == std::string_view::npos || sep == 0 || line.substr(0, sep).find(' ') != std::string_view::npos) {
      skipping = false;
      text += std::string(line) + "\n";
    }
  }
  ErrorKind kind = ErrorKind::connection;
  std::string hint;
  if (!sqlstate.empty()) {
    kind = kind_for_sqlstate(sqlstate);
    if (kind == ErrorKind::other) kind = ErrorKind::config;  // the server refused us for good
    if (held_elsewhere(kind)) kind = ErrorKind::connection;
  } else if (PQconnectionNeedsPassword(conn)) {
    kind = ErrorKind::config;  // the server asked for a password and the DSN has none
    hint = password_hint(conn, where);
  } else if (reached_server && ssl_required && !PQsslInUse(conn)) {
    kind = ErrorKind::config;  // the server answered but cannot do the SSL the DSN demands
    // libpq says only "certificate verify failed" for a wrong CA and an expired certificate alike.
    hint = "; the DSN's sslmode requires TLS: sslrootcert must name the CA that signed the server's certificate, "
           "and every certificate in the chain must be within its dates";
  }
  std::string msg = "cannot connect to " + std::string(where) + ": " + one_line(text);
  if (!sqlstate.empty()) msg += " (SQLSTATE " + sqlstate + ")";
  msg += hint;
  Error e{kind, msg, 0, sqlstate};
  // Too many connections (53300), or a server that accepted the connection and dropped it
  // without a word: reachable, only overloaded for now.
  e.overloaded = sqlstate == "53300" || (sqlstate.empty() && kind == ErrorKind::connection && reached_server);
  return e;
}

}  // namespace dblock::postgres

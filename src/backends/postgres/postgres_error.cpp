// SQLSTATE -> ErrorKind (SOCI's idea: a few portable categories, mapped in one file).
#include "backends/postgres/postgres_error.hpp"

#include <algorithm>
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
  bool line_ended = false;
  for (char c : message) {
    if (c == '\n' || c == '\r') {
      line_ended = !out.empty();
    } else if (c == '\t' || (c == ' ' && (out.empty() || out.back() == ' '))) {
      if (!out.empty() && out.back() != ' ' && !line_ended) out += ' ';
    } else {
      // libpq ends a line without a full stop ("Connection refused\n\tIs the server running
      // ...?"): joined, the sentence keeps its end.
      if (line_ended) out += std::string_view(".:;!?,").find(out.back()) == std::string_view::npos ? ". " : " ";
      line_ended = false;
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
  return Error{kind, msg, 0, state ? state : ""};
}

namespace {

bool is_sqlstate(std::string_view s) {
  return s.size() == 5 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z'); });
}

// "WORD:  " at the start of a line: libpq's layout for DETAIL, HINT, LOCATION... (the word
// itself may be translated, the layout is not).
bool is_labelled(std::string_view line) {
  std::size_t colon = line.find(":  ");
  return colon != std::string_view::npos && colon > 0 && line.substr(0, colon).find(' ') == std::string_view::npos;
}

}  // namespace

Error connect_error(PGconn* conn, std::string_view where, const ConnectProgress& progress) {
  if (!conn) return Error{ErrorKind::connection, "cannot connect to " + std::string(where) + ": out of memory"};
  // libpq keeps no result for a refused connection, but with PQERRORS_VERBOSE (set by
  // Connection while connecting) it writes the server's SQLSTATE into its message as
  // "SEVERITY:  CODE: text": the code is taken from that layout, never from the words, which
  // the server translates (lc_messages). The code leaves the human text, and so do the
  // verbose lines that follow it (LOCATION: the server's source file).
  std::string text, sqlstate;
  bool skipping = false;
  std::string_view all = PQerrorMessage(conn);
  for (std::size_t start = 0; start < all.size();) {
    std::size_t nl = all.find('\n', start);
    std::string_view line = all.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    start = nl == std::string_view::npos ? all.size() : nl + 1;
    std::size_t sep = line.find(":  ");
    if (sep != std::string_view::npos && is_sqlstate(line.substr(sep + 3, 5)) && line.substr(sep + 8, 2) == ": ") {
      sqlstate = line.substr(sep + 3, 5);
      text += std::string(line.substr(0, sep + 3)) + std::string(line.substr(sep + 10)) + "\n";
      skipping = true;
      continue;
    }
    if (skipping && is_labelled(line)) continue;
    skipping = false;
    text += std::string(line) + "\n";
  }
  ErrorKind kind = ErrorKind::connection;
  if (!sqlstate.empty()) {
    kind = kind_for_sqlstate(sqlstate);
    if (kind == ErrorKind::other) kind = ErrorKind::config;  // the server refused us for good
    if (kind == ErrorKind::busy) kind = ErrorKind::connection;
  } else if (PQconnectionNeedsPassword(conn)) {
    kind = ErrorKind::config;  // the server asked for a password and the DSN has none
  } else if (progress.reached_server && progress.ssl_required && !PQsslInUse(conn)) {
    kind = ErrorKind::config;  // the server answered but cannot do the SSL the DSN demands
  }
  std::string msg = "cannot connect to " + std::string(where) + ": " + one_line(text);
  if (!sqlstate.empty()) msg += " (SQLSTATE " + sqlstate + ")";
  Error e{kind, msg, 0, sqlstate};
  // Too many connections (53300), or a server that accepted the connection and dropped it
  // without a word: reachable, only overloaded for now.
  e.overloaded = sqlstate == "53300" || (sqlstate.empty() && kind == ErrorKind::connection && progress.reached_server);
  return e;
}

}  // namespace dblock::postgres

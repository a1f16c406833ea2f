#pragma once
// Errors that happen in normal use (busy, timeouts, lost connections) travel as values;
// exceptions are kept for setup mistakes and caught once in cli.

#include <expected>
#include <string>
#include <utility>

namespace dblock {

/// Portable categories every backend maps its native codes into, so core can
/// tell "held by someone" from "server down" without knowing the database.
/// Each backend's error file sets the kind from native codes only (SQLSTATE, errno, SQLite
/// result codes); core tests the kind and asks the dialect nothing more.
enum class ErrorKind {
  busy,            // lock held elsewhere: a deadlock victim, a serialization or unique conflict
  wait_ended,      // lock held elsewhere, and the statement took nothing: its lock wait ran out
                   // or NOWAIT refused (55P03, errno 1205, 3572)
  lost,            // our lock is definitively gone: row taken over, session killed
  connection,      // server unreachable, connection dropped, statement timed out: may be retried
  config,          // bad DSN, unknown parameter, table of the wrong shape, unsupported strategy
  schema_missing,  // a table or column the statement names is not there (42P01, 42703, errno
                   // 1146, 1054; SQLite: any SQLITE_ERROR, which repair_schema's one more
                   // attempt tells apart): the schema is missing or incomplete
  denied,          // the account lacks a privilege on a table, a column or the database
                   // (42501, errno 1142, 1143, 1044)
  no_session,      // the server session a statement named does not exist (errno 1094)
  usage,           // bad input from the user
  other,           // the database refused a statement for another reason
  internal,        // a bug in dblock
};

/// Someone else holds what was asked: busy, or a lock wait that ended without it.
constexpr bool held_elsewhere(ErrorKind kind) { return kind == ErrorKind::busy || kind == ErrorKind::wait_ended; }

struct Error {
  Error(ErrorKind k, std::string text, int code = 0, std::string state = {})
      : kind(k), message(std::move(text)), native_code(code), sqlstate(std::move(state)) {}

  ErrorKind kind;
  std::string message;
  // The database's own code, kept so a backend decides on codes, never on message text
  // (which a server may translate: lc_messages). 0 / empty when there is none.
  int native_code = 0;   // MySQL errno, SQLite extended result code
  std::string sqlstate;  // PostgreSQL (and MySQL) SQLSTATE
  // A connection error from a server that was reached and turned this connection away for
  // now: too many connections, or it accepted and then dropped the connection before
  // answering. The mark of a start storm rather than an outage: core retries it briefly even
  // without -w (acquire_loop). Set by the backends' native-code mapping, never from message text.
  bool overloaded = false;
};

template <class T = void>
using Result = std::expected<T, Error>;

/// Builds the error side of a Result: `return fail(ErrorKind::busy, "...")`.
inline std::unexpected<Error> fail(ErrorKind kind, std::string message) {
  return std::unexpected<Error>(Error{kind, std::move(message)});
}

/// Thrown for setup and configuration mistakes; cli's top level turns it into an exit code.
struct FatalError {
  Error error;
};

}  // namespace dblock

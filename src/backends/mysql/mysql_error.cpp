#include "backends/mysql/mysql_error.hpp"

#include <errmsg.h>
#include <mysqld_error.h>

namespace dblock::mysql {

// Numbers that not every client library's headers define (MySQL 8 vs MariaDB Connector/C).
constexpr unsigned er_lock_nowait = 3572;                 // MySQL 8: NOWAIT refused
constexpr unsigned er_connection_killed = 1927;           // MariaDB: KILL CONNECTION
constexpr unsigned er_client_interaction_timeout = 4031;  // MySQL 8: idle session killed
constexpr unsigned cr_server_lost_extended = 2055;
// Connector/C: the socket failed under a statement ("Connection reset by peer": a server that
// ended an idle session).
constexpr unsigned cr_err_net_read = 5013;
constexpr unsigned cr_err_net_write = 5014;

ErrorKind classify_errno(unsigned errnum) {
  switch (errnum) {
    // The connection is unusable: refused, unreachable, gone, killed, timed out (2013), or
    // turned away (1040, 1203, 1226: too many connections).
    case CR_CONNECTION_ERROR:
    case CR_CONN_HOST_ERROR:
    case CR_UNKNOWN_HOST:
    case CR_SERVER_GONE_ERROR:
    case CR_SERVER_LOST:
    case CR_COMMANDS_OUT_OF_SYNC:
    case cr_server_lost_extended:
    case ER_CON_COUNT_ERROR:
    case ER_TOO_MANY_USER_CONNECTIONS:
    case ER_USER_LIMIT_REACHED:
    case ER_SERVER_SHUTDOWN:
    case er_connection_killed:
    case er_client_interaction_timeout:
    case cr_err_net_read:
    case cr_err_net_write:
    // On an established TLS connection the server's close (KILL CONNECTION, a restart) reads
    // as a TLS error ("unexpected eof"), not 2013: the connection is gone all the same, and a
    // reconnect now, not a retry later, is the answer. At connect it means a refused
    // certificate or no TLS: mysql_connection.cpp makes that a config error.
    case CR_SSL_CONNECTION_ERROR:
      return ErrorKind::connection;
    // The statement's lock wait ended without the lock: it took nothing.
    case ER_LOCK_WAIT_TIMEOUT:  // innodb_lock_wait_timeout, and MariaDB's NOWAIT
    case er_lock_nowait:
      return ErrorKind::wait_ended;
    case ER_LOCK_DEADLOCK:  // we were the victim; the other side has the row
      return ErrorKind::busy;
    // A table or column the statement names is not there. 1242 (a scalar subquery found two
    // rows): the read of a taken row found a second row of its name, which only a table whose
    // name is not its key allows (mysql_statements.cpp, `taken`); the schema check then says so.
    case ER_NO_SUCH_TABLE:
    case ER_BAD_FIELD_ERROR:
    case ER_SUBQUERY_NO_1_ROW:
      return ErrorKind::schema_missing;
    // A privilege on a table, a column or the database is missing.
    case ER_TABLEACCESS_DENIED_ERROR:
    case ER_COLUMNACCESS_DENIED_ERROR:
    case ER_DBACCESS_DENIED_ERROR:
      return ErrorKind::denied;
    case ER_NO_SUCH_THREAD:  // a KILL named a session the server does not know
      return ErrorKind::no_session;
    // Credentials, unknown database: the operator must act.
    case ER_ACCESS_DENIED_ERROR:
    case ER_ACCESS_DENIED_NO_PASSWORD_ERROR:  // 1698: the account's plugin (unix_socket) said no
    case ER_BAD_DB_ERROR:
    case ER_SPECIFIC_ACCESS_DENIED_ERROR:
      return ErrorKind::config;
    default:
      return ErrorKind::other;
  }
}

Error make_error(unsigned errnum, std::string_view where, std::string_view text, std::string_view sqlstate) {
  std::string message = "mysql " + std::string(where) + ": " + std::string(text) + " (errno " + std::to_string(errnum) + ")";
  Error e{classify_errno(errnum), std::move(message), static_cast<int>(errnum), std::string(sqlstate)};
  // Reached, then turned away (max_connections, max_user_connections, the account's own limit)
  // or dropped before it answered (2013).
  e.overloaded = errnum == ER_CON_COUNT_ERROR || errnum == ER_TOO_MANY_USER_CONNECTIONS ||
                 errnum == ER_USER_LIMIT_REACHED || errnum == CR_SERVER_LOST;
  return e;
}

}  // namespace dblock::mysql

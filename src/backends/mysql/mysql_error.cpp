#include "backends/mysql/mysql_error.hpp"

#include <errmsg.h>
#include <mysqld_error.h>

namespace dblock::mysql {
namespace {

// Numbers that not every client library's headers define (MySQL 8 vs MariaDB Connector/C).
constexpr unsigned er_lock_nowait = 3572;          // MySQL 8: NOWAIT refused
constexpr unsigned er_connection_killed = 1927;    // MariaDB: KILL CONNECTION
constexpr unsigned er_client_interaction_timeout = 4031;  // MySQL 8: idle session killed
constexpr unsigned cr_server_lost_extended = 2055;

}  // namespace

bool is_connection_errno(unsigned errnum) {
  switch (errnum) {
    case CR_CONNECTION_ERROR:    // 2002: socket refused / missing
    case CR_CONN_HOST_ERROR:     // 2003: TCP connect failed or timed out
    case CR_UNKNOWN_HOST:        // 2005
    case CR_SERVER_GONE_ERROR:   // 2006
    case CR_SERVER_LOST:         // 2013: includes read/write timeouts
    case CR_COMMANDS_OUT_OF_SYNC:
    case cr_server_lost_extended:
    case ER_CON_COUNT_ERROR:     // 1040: too many connections
    case ER_TOO_MANY_USER_CONNECTIONS:  // 1203: global max_user_connections
    case ER_USER_LIMIT_REACHED:  // 1226: the account's own MAX_USER_CONNECTIONS
    case ER_SERVER_SHUTDOWN:     // 1053
    case er_connection_killed:
    case er_client_interaction_timeout:
      return true;
    default:
      return false;
  }
}

ErrorKind classify_errno(unsigned errnum) {
  if (is_connection_errno(errnum)) return ErrorKind::connection;
  switch (errnum) {
    case ER_LOCK_WAIT_TIMEOUT:   // 1205: innodb_lock_wait_timeout, and MariaDB's NOWAIT
    case er_lock_nowait:
    case ER_LOCK_DEADLOCK:       // 1213: we were the victim; the other side has the row
      return ErrorKind::busy;
    case ER_ACCESS_DENIED_ERROR:       // 1045: wrong user or password
    case ER_DBACCESS_DENIED_ERROR:     // 1044
    case ER_BAD_DB_ERROR:              // 1049: unknown database
    case ER_TABLEACCESS_DENIED_ERROR:  // 1142: missing privilege on our tables
    case ER_COLUMNACCESS_DENIED_ERROR:
    case ER_SPECIFIC_ACCESS_DENIED_ERROR:
    case ER_NO_SUCH_TABLE:             // 1146
    case ER_BAD_FIELD_ERROR:           // 1054: a table of the wrong shape
      return ErrorKind::config;
    default:
      return ErrorKind::other;
  }
}

bool is_overload_errno(unsigned errnum) {
  switch (errnum) {
    case ER_CON_COUNT_ERROR:            // 1040: max_connections
    case ER_TOO_MANY_USER_CONNECTIONS:  // 1203: max_user_connections
    case ER_USER_LIMIT_REACHED:         // 1226: the account's MAX_USER_CONNECTIONS
    case CR_SERVER_LOST:                // 2013: reached, then dropped before it answered
      return true;
    default:
      return false;
  }
}

bool is_no_such_session(const Error& e) { return e.native_code == ER_NO_SUCH_THREAD; }

bool is_no_such_table(const Error& e) { return e.native_code == ER_NO_SUCH_TABLE; }

bool is_bad_field(const Error& e) { return e.native_code == ER_BAD_FIELD_ERROR; }

Error make_error(unsigned errnum, std::string_view where, std::string_view text, std::string_view sqlstate) {
  std::string message = "mysql ";
  message += where;
  message += ": ";
  message += text;
  message += " (errno " + std::to_string(errnum) + ")";
  Error e{classify_errno(errnum), std::move(message), static_cast<int>(errnum), std::string(sqlstate)};
  e.overloaded = is_overload_errno(errnum);
  return e;
}

}  // namespace dblock::mysql

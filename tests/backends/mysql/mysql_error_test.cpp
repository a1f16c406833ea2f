// MySQL error classification, without a server: errors are decided on the server's error
// number, never on its message text.
#include <doctest/doctest.h>

#include <errmsg.h>
#include <mysqld_error.h>

#include <string>

#include "backends/mysql/mysql_error.hpp"

using namespace dblock;

TEST_SUITE("mysql.errors") {
  TEST_CASE("errors are classified by number") {
    CHECK(mysql::classify_errno(ER_LOCK_WAIT_TIMEOUT) == ErrorKind::busy);
    CHECK(mysql::classify_errno(ER_LOCK_DEADLOCK) == ErrorKind::busy);
    CHECK(mysql::classify_errno(3572) == ErrorKind::busy);  // MySQL 8 NOWAIT
    CHECK(mysql::classify_errno(CR_SERVER_LOST) == ErrorKind::connection);
    CHECK(mysql::classify_errno(CR_SERVER_GONE_ERROR) == ErrorKind::connection);
    // An established TLS connection the server closed (KILL CONNECTION) reads as 2026.
    CHECK(mysql::classify_errno(CR_SSL_CONNECTION_ERROR) == ErrorKind::connection);
    CHECK(mysql::classify_errno(1927) == ErrorKind::connection);  // MariaDB: connection killed
    CHECK(mysql::classify_errno(ER_NO_SUCH_TABLE) == ErrorKind::config);
    CHECK(mysql::classify_errno(ER_ACCESS_DENIED_ERROR) == ErrorKind::config);
    CHECK(mysql::classify_errno(ER_NO_SUCH_THREAD) == ErrorKind::other);
  }

  TEST_CASE("an error keeps its number and SQLSTATE; the kind never depends on the text") {
    Error e = mysql::make_error(ER_LOCK_WAIT_TIMEOUT, "mysql://h/db", "Délai d'attente dépassé", "HY000");
    CHECK(e.kind == ErrorKind::busy);
    CHECK(e.native_code == ER_LOCK_WAIT_TIMEOUT);
    CHECK(e.sqlstate == "HY000");
    Error killed = mysql::make_error(ER_NO_SUCH_THREAD, "mysql://h/db", "Thread inconnu : 12", "HY000");
    CHECK(mysql::is_no_such_session(killed));
    // Text that merely mentions the number is not the number.
    Error other{ErrorKind::other, "mysql: something (errno 1094)"};
    CHECK_FALSE(mysql::is_no_such_session(other));
  }
}

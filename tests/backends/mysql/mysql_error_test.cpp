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
    // A lock wait that ended took nothing; a deadlock victim may have taken something.
    CHECK(mysql::classify_errno(ER_LOCK_WAIT_TIMEOUT) == ErrorKind::wait_ended);
    CHECK(mysql::classify_errno(3572) == ErrorKind::wait_ended);  // MySQL 8 NOWAIT
    CHECK(mysql::classify_errno(ER_LOCK_DEADLOCK) == ErrorKind::busy);
    CHECK(held_elsewhere(mysql::classify_errno(ER_LOCK_WAIT_TIMEOUT)));
    CHECK(held_elsewhere(mysql::classify_errno(ER_LOCK_DEADLOCK)));
    CHECK(mysql::classify_errno(CR_SERVER_LOST) == ErrorKind::connection);
    CHECK(mysql::classify_errno(CR_SERVER_GONE_ERROR) == ErrorKind::connection);
    // An established TLS connection the server closed (KILL CONNECTION) reads as 2026.
    CHECK(mysql::classify_errno(CR_SSL_CONNECTION_ERROR) == ErrorKind::connection);
    CHECK(mysql::classify_errno(1927) == ErrorKind::connection);  // MariaDB: connection killed
    // What core asks of an error, each a kind of its own (core/error.hpp).
    CHECK(mysql::classify_errno(ER_NO_SUCH_TABLE) == ErrorKind::schema_missing);
    CHECK(mysql::classify_errno(ER_BAD_FIELD_ERROR) == ErrorKind::schema_missing);
    CHECK(mysql::classify_errno(ER_SUBQUERY_NO_1_ROW) == ErrorKind::schema_missing);
    CHECK(mysql::classify_errno(ER_TABLEACCESS_DENIED_ERROR) == ErrorKind::denied);
    CHECK(mysql::classify_errno(ER_COLUMNACCESS_DENIED_ERROR) == ErrorKind::denied);
    CHECK(mysql::classify_errno(ER_DBACCESS_DENIED_ERROR) == ErrorKind::denied);
    CHECK(mysql::classify_errno(ER_ACCESS_DENIED_ERROR) == ErrorKind::config);  // the login's
    CHECK(mysql::classify_errno(ER_NO_SUCH_THREAD) == ErrorKind::no_session);
  }

  TEST_CASE("an error keeps its number and SQLSTATE; the kind never depends on the text") {
    Error e = mysql::make_error(ER_LOCK_WAIT_TIMEOUT, "mysql://h/db", "Délai d'attente dépassé", "HY000");
    CHECK(e.kind == ErrorKind::wait_ended);
    CHECK(e.native_code == ER_LOCK_WAIT_TIMEOUT);
    CHECK(e.sqlstate == "HY000");
    Error killed = mysql::make_error(ER_NO_SUCH_THREAD, "mysql://h/db", "Thread inconnu : 12", "HY000");
    CHECK(killed.kind == ErrorKind::no_session);
    // Text that merely mentions a number is not the number.
    Error other = mysql::make_error(1105, "mysql://h/db", "something (errno 1094)", "HY000");
    CHECK(other.kind == ErrorKind::other);
  }
}

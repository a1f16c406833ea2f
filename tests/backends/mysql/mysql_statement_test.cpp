// The MySQL statement builder and error classification, without a server: placeholders are
// counted against values piece by piece, values own their bytes, and errors are decided on
// the server's error number, never on its message text.
#include <doctest/doctest.h>

#include <errmsg.h>
#include <mysqld_error.h>

#include <string>

#include "backends/mysql/mysql_error.hpp"
#include "backends/mysql/mysql_statement.hpp"

using namespace dblock;
using dblock::mysql::Param;
using dblock::mysql::Sql;

namespace {

std::string text_of(const Param& p) { return std::get<std::string>(p.value()); }
std::int64_t int_of(const Param& p) { return std::get<std::int64_t>(p.value()); }

}  // namespace

TEST_SUITE("mysql.statement") {
  TEST_CASE("placeholders inside quoted strings and identifiers are not counted") {
    CHECK(mysql::placeholder_count("SELECT ?") == 1);
    CHECK(mysql::placeholder_count("SELECT '?', \"?\", `a?b`, ?") == 1);
    CHECK(mysql::placeholder_count("SELECT 'it''s ?', 'a\\'?', ?, ?") == 2);
    CHECK(mysql::placeholder_count("") == 0);
  }

  TEST_CASE("pieces added with their values keep the values in placeholder order") {
    Sql q("UPDATE `t` SET a = ?", 7);
    q.add(", b = ?", std::string("bee"));
    q.add(" WHERE name = ? AND token = ?", std::string_view("key"), std::int64_t{42});
    REQUIRE(q.check());
    CHECK(q.text() == "UPDATE `t` SET a = ?, b = ? WHERE name = ? AND token = ?");
    REQUIRE(q.params().size() == 4);
    CHECK(int_of(q.params()[0]) == 7);
    CHECK(text_of(q.params()[1]) == "bee");
    CHECK(text_of(q.params()[2]) == "key");
    CHECK(int_of(q.params()[3]) == 42);
  }

  TEST_CASE("a piece with fewer values than placeholders is internal, even when a later piece evens the count") {
    Sql q("UPDATE t SET owner = ?, host = ?", std::string("me"));
    q.add(" WHERE pid = ?", 1, 2);  // the total matches, but every value would be one column off
    CHECK(q.params().size() == mysql::placeholder_count(q.text()));
    auto ok = q.check();
    REQUIRE_FALSE(ok);
    CHECK(ok.error().kind == ErrorKind::internal);
  }

  TEST_CASE("a statement with more values than placeholders is internal") {
    Sql q("SELECT 1", 5);
    auto ok = q.check();
    REQUIRE_FALSE(ok);
    CHECK(ok.error().kind == ErrorKind::internal);
  }

  TEST_CASE("a fragment brings its values and its fault along") {
    Sql cond("(? = 0 OR x > ?)", 3, 3);
    Sql q("SELECT IF(");
    q.add(cond).add(", ?, 0)", 9);
    REQUIRE(q.check());
    CHECK(q.params().size() == 3);
    Sql bad("x = ?");
    Sql outer("SELECT 1 WHERE ");
    outer.add(bad);
    CHECK_FALSE(outer.check());
  }

  TEST_CASE("bound values own their bytes: the source string may die before the statement runs") {
    Sql q;
    {
      std::string key(300, 'k');
      q = Sql("SELECT ?", key);
      key.assign(300, 'x');
    }
    CHECK(text_of(q.params()[0]) == std::string(300, 'k'));
  }

  TEST_CASE("optional values bind as NULL or the value") {
    Sql q("SELECT ?, ?", std::optional<int>(), std::optional<int>(3));
    REQUIRE(q.check());
    CHECK(std::holds_alternative<std::nullptr_t>(q.params()[0].value()));
    CHECK(int_of(q.params()[1]) == 3);
  }
}

TEST_SUITE("mysql.errors") {
  TEST_CASE("errors are classified by number") {
    CHECK(mysql::classify_errno(ER_LOCK_WAIT_TIMEOUT) == ErrorKind::busy);
    CHECK(mysql::classify_errno(ER_LOCK_DEADLOCK) == ErrorKind::busy);
    CHECK(mysql::classify_errno(3572) == ErrorKind::busy);  // MySQL 8 NOWAIT
    CHECK(mysql::classify_errno(CR_SERVER_LOST) == ErrorKind::connection);
    CHECK(mysql::classify_errno(CR_SERVER_GONE_ERROR) == ErrorKind::connection);
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

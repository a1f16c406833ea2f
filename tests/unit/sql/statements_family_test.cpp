// sql::Statements (sql_backend.hpp): a statement family given as its builder is built on first
// use and once; one given whole is used as it is.

#include <doctest/doctest.h>

#include <string>

#include "core/sql/sql_backend.hpp"

using namespace dblock;

TEST_CASE("sql::Statements: a family given as its builder is built on first use, once") {
  int built = 0;
  const sql::Statements<sql::ReleaseStatements> family(std::function([&] {
    ++built;
    sql::ReleaseStatements s;
    s.release = {"release.release", "UPDATE t SET released = 1 WHERE name = :key"};
    return s;
  }));
  CHECK(built == 0);
  CHECK(family.get().release.id == "release.release");
  CHECK(family.get().release.text.find(":key") != std::string::npos);
  CHECK(built == 1);
}

TEST_CASE("sql::Statements: a family given whole is that family") {
  sql::ReleaseStatements s;
  s.release = {"release.release", "UPDATE t SET released = 1"};
  const sql::Statements<sql::ReleaseStatements> family(s);
  CHECK(family.get().release.text == "UPDATE t SET released = 1");
}

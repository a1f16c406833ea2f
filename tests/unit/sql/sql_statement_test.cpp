// Named placeholders (src/core/sql/sql_session.hpp) without a database: each dialect's
// placeholders replace `:name` outside quotes only, values are bound by name in placeholder
// order, and a placeholder without a value is internal before anything reaches a server.

#include <doctest/doctest.h>

#include "core/sql/sql_session.hpp"

using namespace dblock;

TEST_SUITE("sql.statement") {
  TEST_CASE("names inside quoted strings and identifiers are not placeholders") {
    const auto c = sql::compile("SELECT ':a', \":b\", `c:d`, 'it''s :e', :f", sql::PlaceholderStyle::question);
    CHECK(c.text == "SELECT ':a', \":b\", `c:d`, 'it''s :e', ?");
    CHECK(c.names == std::vector<std::string>{"f"});
    CHECK(sql::compile("SELECT x::bigint, @a := 1", sql::PlaceholderStyle::dollar).names.empty());
  }

  TEST_CASE("each style numbers a name used twice its own way") {
    const std::string text = "UPDATE t SET a = :a WHERE name = :key AND b = :a";
    auto question = sql::compile(text, sql::PlaceholderStyle::question);
    CHECK(question.text == "UPDATE t SET a = ? WHERE name = ? AND b = ?");
    CHECK(question.names == std::vector<std::string>{"a", "key", "a"});
    auto dollar = sql::compile(text, sql::PlaceholderStyle::dollar);
    CHECK(dollar.text == "UPDATE t SET a = $1 WHERE name = $2 AND b = $1");
    CHECK(dollar.names == std::vector<std::string>{"a", "key"});
    CHECK(sql::compile(text, sql::PlaceholderStyle::numbered).text == "UPDATE t SET a = ?1 WHERE name = ?2 AND b = ?1");
  }

  TEST_CASE("values are bound in placeholder order, whatever order they were given in") {
    const auto c = sql::compile("SELECT :b, :a, :b", sql::PlaceholderStyle::question);
    const sql::Params params{{"a", std::int64_t{7}}, {"b", std::string("bee")}, {"unused", sql::Value()}};
    auto values = sql::bind_order(c, params, "test.order");
    REQUIRE(values);
    REQUIRE(values->size() == 3);
    CHECK(std::get<std::string>(*(*values)[0]) == "bee");
    CHECK(std::get<std::int64_t>(*(*values)[1]) == 7);
    CHECK(std::get<std::string>(*(*values)[2]) == "bee");
  }

  TEST_CASE("a placeholder without a value is internal and names the statement and the placeholder") {
    const auto c = sql::compile("SELECT :a, :b", sql::PlaceholderStyle::question);
    auto values = sql::bind_order(c, sql::Params{{"a", std::int64_t{1}}}, "test.fewer");
    REQUIRE_FALSE(values);
    CHECK(values.error().kind == ErrorKind::internal);
    CHECK(values.error().message == "statement test.fewer: no value for :b");
  }

  TEST_CASE("a NULL is a value") {
    const auto c = sql::compile("SELECT :a", sql::PlaceholderStyle::question);
    // bind_order points into the Params: they must outlive `values`.
    const sql::Params params{{"a", sql::value_of(std::optional<int>())}};
    auto values = sql::bind_order(c, params, "test.null");
    REQUIRE(values);
    CHECK(std::holds_alternative<std::monostate>(*values->at(0)));
  }
}

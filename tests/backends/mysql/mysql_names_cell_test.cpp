// A key's wake and queue names as this dblock binds them (Connection::run supplies :wake and
// :queue from :key, mysql_names.hpp) against the names an older dblock computed in SQL, on the
// server: byte for byte the same, so during a rolling upgrade an older holder still wakes this
// version's waiters and the other way round.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/mysql/mysql_connection.hpp"
#include "backends/mysql/mysql_names.hpp"
#include "backends/registry.hpp"
#include "core/sql/identifiers.hpp"
#include "support/test_env.hpp"

using namespace dblock;

namespace {

// The older dblock's formula (mysql_statements.cpp before the names were bound): `label` + the
// first `digits` hex digits of SHA2 over DATABASE(), NUL, the prefix, NUL and the key, as bytes.
std::string sql_name(const std::string& prefix, const std::string& label, int digits) {
  return "CONCAT('" + label + "', LEFT(SHA2(CONCAT(CAST(DATABASE() AS BINARY), 0x00, CAST(" +
         quote_identifier(prefix, '\'') + " AS BINARY), 0x00, CAST(:key AS BINARY)), 256), " + std::to_string(digits) +
         "))";
}

// A session of the cell's server, with `options`.
std::unique_ptr<mysql::Connection> open_connection(const BackendOptions& options) {
  auto dsn = parse_dsn(test::dsn());
  REQUIRE(dsn);
  auto conn = mysql::Connection::open(*dsn, options);
  REQUIRE_MESSAGE(conn, conn.error().message);
  return std::move(*conn);
}

}  // namespace

TEST_CASE("mysql: a key's wake and queue names are the ones an older dblock computed in SQL" *
          doctest::test_suite("mysql")) {
  BackendOptions options;
  options.table_prefix = test::unique_prefix();
  auto conn = open_connection(options);
  const sql::Statement names{"test.names", "SELECT :wake, :queue, " + sql_name(options.table_prefix, "dblock-wake:", 52) +
                                               ", " + sql_name(options.table_prefix, "dblock-queue:", 51)};
  const std::vector<std::string> keys{
      "job", "", "K", "k ", "a/b:c'd\\e",
      "\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87 \xf0\x9f\x94\x92 \xe6\x97\xa5\xe6\x9c\xac",  // Cyrillic, an emoji, CJK
      std::string(255, 'x'),
      std::string(63, 'x') + "\xf0\x9f\x94\x92" + std::string(188, 'y'),  // 255 bytes, a 4-byte character inside
  };
  for (const std::string& key : keys) {
    CAPTURE(key);
    auto rows = conn->run(names, {{"key", key}});
    REQUIRE_MESSAGE(rows, rows.error().message);
    REQUIRE(rows->size() == 1);
    const auto& row = (*rows)[0];
    CHECK(row.text(0).size() == 64);
    CHECK(row.text(1).size() == 64);
    CHECK(row.text(0) == row.text(2));
    CHECK(row.text(1) == row.text(3));
    // Each key its own names.
    if (key != "job") CHECK(row.text(0) != (*conn->run(names, {{"key", std::string("job")}}))[0].text(0));
  }
}

// A row lock's numbering proves its grant by the holder tag's holder, the tag's name computed
// here and bound (:held, mysql_session_lock.cpp) while lock.claim takes the tag under the name the
// server computes (SessionLock::tag): spelled otherwise, no numbering at a distance would ever
// find its proof.
TEST_CASE("mysql: a key's holder tag name is the one the lock statement takes in SQL" * doctest::test_suite("mysql")) {
  BackendOptions options;
  options.table_prefix = test::unique_prefix();
  auto conn = open_connection(options);
  const std::string label(mysql::held_label);
  const sql::Statement name{"test.held", "SELECT CONCAT(" + sql_name(options.table_prefix, label, mysql::held_digits) +
                                             ", :tag)"};
  const std::string tag = "0123456789abcdef0123456789abcdef";
  for (const std::string key : {"job", "", "K", "a/b:c'd\\e", "\xf0\x9f\x94\x92"}) {
    CAPTURE(key);
    auto rows = conn->run(name, {{"key", key}, {"tag", tag}});
    REQUIRE_MESSAGE(rows, rows.error().message);
    REQUIRE(rows->size() == 1);
    const std::string held = mysql::held_name(conn->database(), options.table_prefix, key, tag);
    CHECK(held.size() == 64);
    CHECK((*rows)[0].text(0) == held);
  }
}

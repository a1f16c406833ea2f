// The failover gate (src/core/sql/failover.cpp) on a scripted session: the record's read may
// also say who serves the session (FailoverStatements::read), which then needs not be asked
// apart (PostgreSQL's bookkeeping session names its release statement only once it knows).

#include <doctest/doctest.h>

#include "core/sql/failover.hpp"
#include "support/scripted_session.hpp"

using namespace dblock;
using testing::row_of;
using testing::ScriptedSession;

namespace {

sql::FailoverStatements statements() { return testing::failover_statements(); }

// The record as recorded by this incarnation, nothing in force, a TTL of a minute (here, not
// delayed, covering); `serving` the session id it reads (none: the dialect's read has ten columns).
sql::Rows record(std::optional<std::int64_t> serving) {
  std::vector<sql::Rows::Cell> cells{"inc", "inc", sql::Rows::Cell(), "5", sql::Rows::Cell(), "1000", "60000", "1", "0", "1"};
  if (serving) cells.emplace_back(std::to_string(*serving));
  return row_of(std::move(cells));
}

}  // namespace

TEST_CASE("failover: a read that names the session the connection was given tells the session it is served directly") {
  ScriptedSession s;
  s.started = 7;
  s.answers["failover.read"] = record(7);
  auto gate = sql::failover::admit(s, statements(), Millis(1000));
  REQUIRE(gate);
  CHECK(gate->open);
  CHECK(gate->fence == 5);
  CHECK(s.seen_direct == 1);
}

TEST_CASE("failover: another server session (a pooler's), or no id read, tells nothing") {
  for (auto serving : {std::optional<std::int64_t>(9), std::optional<std::int64_t>()}) {
    ScriptedSession s;
    s.started = 7;
    s.answers["failover.read"] = record(serving);
    auto gate = sql::failover::admit(s, statements(), Millis(1000));
    REQUIRE(gate);
    CHECK(gate->open);
    CHECK(s.seen_direct == 0);
  }
}

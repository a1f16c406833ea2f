// with_retry (src/core/sql/lease_locker.hpp) without a database: a statement the server
// rolled back as a conflict (busy: a deadlock, a Galera certification failure) runs again, a
// bounded number of times; a lost connection is reopened once; any other failure stands.

#include <doctest/doctest.h>

#include <deque>

#include "core/sql/lease_locker.hpp"
#include "support/scripted_session.hpp"

using namespace dblock;

namespace {

// A statement that fails with each of `kinds` in turn, then succeeds.
struct Script {
  std::deque<ErrorKind> kinds;
  int runs = 0;
  Result<int> operator()() {
    ++runs;
    if (kinds.empty()) return 7;
    const ErrorKind k = kinds.front();
    kinds.pop_front();
    return std::unexpected(Error{k, "scripted"});
  }
};

}  // namespace

TEST_CASE("with_retry runs a statement rolled back as a conflict again") {
  testing::ScriptedSession session;
  Script s{{ErrorKind::busy, ErrorKind::busy}};
  auto r = sql::with_retry(session, [&] { return s(); });
  REQUIRE(r);
  CHECK(*r == 7);
  CHECK(s.runs == 3);
  CHECK(session.reconnects == 0);
}

TEST_CASE("with_retry gives up on conflicts after conflict_attempts runs") {
  testing::ScriptedSession session;
  Script s{std::deque<ErrorKind>(10, ErrorKind::busy)};
  auto r = sql::with_retry(session, [&] { return s(); });
  REQUIRE_FALSE(r);
  CHECK(r.error().kind == ErrorKind::busy);
  CHECK(s.runs == sql::conflict_attempts);
}

TEST_CASE("with_retry reconnects once after a lost connection") {
  testing::ScriptedSession session;
  Script s{{ErrorKind::connection}};
  auto r = sql::with_retry(session, [&] { return s(); });
  REQUIRE(r);
  CHECK(s.runs == 2);
  CHECK(session.reconnects == 1);
}

TEST_CASE("with_retry leaves any other failure alone") {
  testing::ScriptedSession session;
  Script s{{ErrorKind::lost}};
  auto r = sql::with_retry(session, [&] { return s(); });
  REQUIRE_FALSE(r);
  CHECK(r.error().kind == ErrorKind::lost);
  CHECK(s.runs == 1);
}

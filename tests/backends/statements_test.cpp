// Every dialect writes each statement the strategies run (src/core/sql/statements.hpp). One left
// empty (a merge that dropped a line once did) fails only on a server, as an empty query, and
// only in the cells and paths that run it; here it fails without one.

#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "backends/mysql/mysql_tables.hpp"
#include "backends/postgres/postgres_tables.hpp"
#include "backends/sqlite/sqlite_tables.hpp"

using namespace dblock;

namespace {

// sessions: the dialect has the session strategies (SQLite has the lease only).
void check_lease_statements(const char* dialect, const sql::LeaseStatements& s, bool sessions) {
  INFO(dialect);
  CHECK_FALSE(s.begin.empty());
  CHECK_FALSE(s.begin_release.empty());
  std::vector<std::pair<const char*, const sql::Statement*>> all = {
      {"take", &s.take},
      {"refusal", &s.refusal},
      {"renew", &s.renew},
      {"release", &s.release},
      {"history.add", &s.history.add},
      {"history.oldest", &s.history.oldest},
      {"history.trim", &s.history.trim},
      {"header_take", &s.header_take},
      {"header_refusal", &s.header_refusal},
      {"lock_row", &s.lock_row},
  };
  if (sessions) all.emplace_back("session_take", &s.session_take);
  for (const auto& [name, st] : all) {
    INFO(name);
    CHECK_FALSE(st->id.empty());
    CHECK_FALSE(st->text.empty());
  }
}

}  // namespace

TEST_CASE("every dialect writes every statement of the lease and session strategies") {
  check_lease_statements("sqlite", sqlite::lease_statements("dblock_"), false);
  check_lease_statements("mysql", mysql::lease_statements("dblock_", false), true);
  check_lease_statements("mariadb", mysql::lease_statements("dblock_", true), true);
  check_lease_statements("postgres", postgres::lease_statements("dblock_"), true);
}

TEST_CASE("every server dialect writes every statement its session strategies' server lock must have") {
  for (const auto& [dialect, s] : {std::pair{"mysql", mysql::lock_statements("dblock_", false)},
                                   std::pair{"mariadb", mysql::lock_statements("dblock_", true)},
                                   std::pair{"postgres", postgres::lock_statements("dblock_")}}) {
    INFO(dialect);
    CHECK_FALSE(s.begin.empty());
    for (const sql::Statement* st : {&s.advisory_wait, &s.advisory_holds, &s.advisory_give_back, &s.lock_wait,
                                     &s.lock_claim, &s.lock_claim_nowait, &s.make_claim, &s.insert_claim,
                                     &s.holds_claim, &s.alive}) {
      INFO(st->id);
      CHECK_FALSE(st->text.empty());
    }
    // A dialect that folds the numbered take in writes its waiting form at least (the other
    // defaults to it).
    CHECK((s.advisory_numbered_try.empty() || !s.advisory_numbered_wait.empty()));
    CHECK(s.tag.empty() == s.untag.empty());
  }
}

// A MariaDB lease's release wakes the key's next waiter before its COMMIT: the waiter's take
// then waits for the row's lock, which the COMMIT lets go before its disk wait, and so runs
// during that wait instead of after it; the answer still comes after the COMMIT.
TEST_CASE("MariaDB's lease release gives the key's wake name and queue back right before its COMMIT") {
  const std::string text = mysql::lease_statements("dblock_", true).release_recorded.text;
  const auto woken = text.find("RELEASE_LOCK(:wake_given_back)");
  const auto queued = text.find("RELEASE_LOCK(:queue)");
  const auto commit = text.find("COMMIT;");
  REQUIRE(woken != std::string::npos);
  REQUIRE(queued != std::string::npos);
  REQUIRE(commit != std::string::npos);
  CHECK(text.find("INSERT INTO `dblock_runs`") < woken);  // the run's history row ahead of both
  CHECK(woken < commit);
  CHECK(queued < commit);
  CHECK(text.find("woken, queued;", commit) != std::string::npos);  // answered once committed
}

// doctor's pooler check (src/core/sql/pooler.cpp) on scripted sessions: what the server session
// ids a connection is given and then answered mean, and which strategies each verdict fails.

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/sql/pooler.hpp"
#include "support/scripted_session.hpp"

using namespace dblock;
using testing::row_of;
using testing::ScriptedSession;

namespace {

const sql::Statement session_id{"doctor.session_id", "SELECT id"};

sql::Rows id(std::int64_t v) { return row_of({std::to_string(v)}); }

// Our session, handed server session `started` at start-up and then answering `ours` in turn,
// and the second one the check may open (`theirs`, counted in `opened`).
struct Pooler {
  ScriptedSession ours;
  std::unique_ptr<ScriptedSession> theirs = std::make_unique<ScriptedSession>();
  int opened = 0;

  Pooler(std::int64_t started, const std::vector<std::int64_t>& answers, std::int64_t their_answer = 0) {
    ours.started = started;
    for (std::int64_t a : answers) ours.in_turn[session_id.id].push_back(id(a));
    theirs->answers[session_id.id] = id(their_answer);
  }
  DoctorCheck check(Strategy strategy) {
    return sql::pooler_check(ours, session_id, strategy, [this]() -> Result<std::unique_ptr<sql::Session>> {
      ++opened;
      if (!theirs) return fail(ErrorKind::connection, "no second session");
      return std::unique_ptr<sql::Session>(std::move(theirs));
    });
  }
};

const Strategy all[] = {Strategy::lease, Strategy::advisory, Strategy::for_update, Strategy::txn_insert};

}  // namespace

TEST_CASE("pooler: the session the connection was given answers every time: direct, every strategy safe") {
  for (Strategy s : all) {
    Pooler p(7, {7, 7});
    const DoctorCheck c = p.check(s);
    CHECK(c.name == "pooler");
    CHECK(c.ok);
    CHECK(c.detail.starts_with("direct connection"));
    CHECK(p.opened == 0);
  }
}

TEST_CASE("pooler: a pooler's own id at start-up, and the session kept while another client's transaction runs: "
          "session mode, every strategy safe") {
  for (Strategy s : all) {
    Pooler p(1, {7, 7, 7, 7, 7, 7}, 8);
    const DoctorCheck c = p.check(s);
    CHECK(c.ok);
    CHECK(c.detail.starts_with("a connection pooler in session mode"));
    CHECK(p.opened == 1);
    CHECK(p.ours.runs[session_id.id] == 6);
  }
}

TEST_CASE("pooler: a busy transaction pool hands the old server session back once, then another: transaction "
          "pooling, not session mode") {
  // Another client of the pool held server session 7 when the second client asked (it got 8), and
  // gave it back before this session's first ask: one answer alone looked like session mode.
  for (Strategy s : all) {
    Pooler p(1, {7, 7, 7, 7, 9}, 8);
    const DoctorCheck c = p.check(s);
    CHECK(c.ok == !is_session_strategy(s));
    CHECK(c.detail.starts_with("transaction pooling"));
  }
}

TEST_CASE("pooler: transaction pooling fails the session strategies and passes lease") {
  struct Case {
    const char* what;
    std::int64_t started;
    std::vector<std::int64_t> ours;
    std::int64_t theirs;
    int ours_runs;
  };
  const Case cases[] = {
      {"the server session changes between two probes", 7, {7, 9}, 0, 2},
      {"our server session changes once another client connected", 1, {7, 7, 9}, 8, 3},
      {"another client's transaction gets our server session (asked no more)", 1, {7, 7, 7}, 7, 3},
      {"our server session changes while another client's transaction runs", 1, {7, 7, 7, 9}, 8, 4},
  };
  for (const Case& k : cases)
    for (Strategy s : all) {
      CAPTURE(k.what);
      CAPTURE(std::string(to_string(s)));
      Pooler p(k.started, k.ours, k.theirs);
      const DoctorCheck c = p.check(s);
      CHECK(c.detail.starts_with("transaction pooling"));
      CHECK(c.ok == (s == Strategy::lease));
      CHECK(p.ours.runs[session_id.id] == k.ours_runs);
    }
}

TEST_CASE("pooler: a probe or the second session that fails fails the check, with its message") {
  Pooler lost(7, {7, 7});
  lost.ours.lose_first_reply.insert(session_id.id);
  DoctorCheck c = lost.check(Strategy::lease);
  CHECK_FALSE(c.ok);
  CHECK(c.detail == "the reply was lost");

  Pooler silent(7, {});
  c = silent.check(Strategy::lease);
  CHECK_FALSE(c.ok);
  CHECK(c.detail.find("doctor.session_id") != std::string::npos);

  Pooler unreachable(1, {7, 7});
  unreachable.theirs.reset();
  c = unreachable.check(Strategy::lease);
  CHECK_FALSE(c.ok);
  CHECK(c.detail == "no second session");
}

TEST_CASE("pooler: served_directly compares the answer with the id given at start-up") {
  Pooler p(7, {7, 8});
  auto direct = sql::served_directly(p.ours, session_id);
  REQUIRE(direct);
  CHECK(*direct);
  direct = sql::served_directly(p.ours, session_id);
  REQUIRE(direct);
  CHECK_FALSE(*direct);
}

namespace {

// session_strategy_answered on `p`'s sessions, the failover record's read having answered
// (`id`, `galera`) in its columns 10 and 11.
Result<void> allowed(Pooler& p, Strategy s, std::int64_t id, int galera) {
  std::vector<sql::Rows::Cell> cells(10, "0");
  cells.push_back(std::to_string(id));
  cells.push_back(std::to_string(galera));
  const sql::Rows read = row_of(cells);
  return sql::session_strategy_answered(p.ours, read[0], 10, "failover.read", session_id, s,
                                        [&p]() -> Result<std::unique_ptr<sql::Session>> {
                                          ++p.opened;
                                          return std::unique_ptr<sql::Session>(std::move(p.theirs));
                                        });
}

const Strategy session_strategies[] = {Strategy::advisory, Strategy::for_update, Strategy::txn_insert};

}  // namespace

TEST_CASE("session strategies: a direct connection is allowed on the failover read alone, no statement more") {
  for (Strategy s : session_strategies) {
    Pooler p(7, {});
    CHECK(allowed(p, s, 7, 0));
    CHECK(p.ours.sent.empty());
    CHECK(p.opened == 0);
  }
}

TEST_CASE("session strategies: lease is not judged") {
  Pooler p(7, {});
  CHECK(allowed(p, Strategy::lease, 1, 1));
  CHECK(p.ours.sent.empty());
}

TEST_CASE("session strategies: a Galera node is refused (78), naming it and lease") {
  for (Strategy s : session_strategies) {
    CAPTURE(std::string(to_string(s)));
    Pooler p(7, {});
    auto r = allowed(p, s, 7, 1);
    REQUIRE_FALSE(r);
    CHECK(r.error().kind == ErrorKind::config);
    CHECK(r.error().message.find("Galera") != std::string::npos);
    CHECK(r.error().message.find("--strategy " + std::string(to_string(s))) != std::string::npos);
    CHECK(r.error().message.find("Use --strategy lease") != std::string::npos);
    CHECK(p.opened == 0);
  }
}

TEST_CASE("session strategies: transaction pooling is refused (78), naming the fixes; session pooling is allowed") {
  for (Strategy s : session_strategies) {
    CAPTURE(std::string(to_string(s)));
    Pooler tx(1, {7, 7, 7}, 7);  // another client's transaction gets our server session
    auto r = allowed(tx, s, 7, 0);
    REQUIRE_FALSE(r);
    CHECK(r.error().kind == ErrorKind::config);
    CHECK(r.error().message.find("transaction pooling") != std::string::npos);
    CHECK(r.error().message.find("Use --strategy lease, or connect to the server directly or through session pooling") !=
          std::string::npos);
    CHECK(tx.opened == 1);

    Pooler changed(1, {9});  // the server session changed between two statements
    r = allowed(changed, s, 7, 0);
    REQUIRE_FALSE(r);
    CHECK(r.error().kind == ErrorKind::config);
    CHECK(changed.opened == 0);

    Pooler session(1, {7, 7, 7, 7, 7}, 8);
    CHECK(allowed(session, s, 7, 0));
    CHECK(session.opened == 1);
  }
}

TEST_CASE("session strategies: a probe that fails is that error, not a verdict") {
  Pooler p(1, {7});
  p.theirs.reset();
  auto no_other = []() -> Result<std::unique_ptr<sql::Session>> { return fail(ErrorKind::connection, "no second session"); };
  // A read without the session's id: an error of its own.
  const sql::Rows short_read = row_of({"0"});
  auto r = sql::session_strategy_answered(p.ours, short_read[0], 10, "failover.read", session_id, Strategy::advisory,
                                          no_other);
  REQUIRE_FALSE(r);
  CHECK(r.error().kind == ErrorKind::other);
  std::vector<sql::Rows::Cell> cells(10, "0");
  cells.push_back("7");
  cells.push_back("0");
  const sql::Rows read = row_of(cells);
  r = sql::session_strategy_answered(p.ours, read[0], 10, "failover.read", session_id, Strategy::advisory, no_other);
  REQUIRE_FALSE(r);
  CHECK(r.error().kind == ErrorKind::connection);
}

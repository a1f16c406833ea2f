// The row layer every backend shares (src/core/sql/lock_rows.hpp), without a database:
// the state rule of docs/backend-contract.md, never-taken keys, row decoding, selector wording.

#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/sql/lock_rows.hpp"

using namespace dblock;
using State = LockStatus::State;

namespace {

// A result row in memory: NULL, an integer or text per column.
using Cell = std::variant<std::monostate, std::int64_t, std::string>;

class FakeRow final : public rows::ColumnReader {
 public:
  explicit FakeRow(std::vector<Cell> cells) : cells_(std::move(cells)) {}
  bool is_null(int column) const override { return std::holds_alternative<std::monostate>(at(column)); }
  std::string text(int column) const override {
    if (auto* t = std::get_if<std::string>(&at(column))) return *t;
    if (auto* i = std::get_if<std::int64_t>(&at(column))) return std::to_string(*i);
    return {};
  }
  std::int64_t int64(int column) const override {
    if (auto* i = std::get_if<std::int64_t>(&at(column))) return *i;
    return std::stoll(std::get<std::string>(at(column)));
  }

 private:
  const Cell& at(int column) const { return cells_.at(static_cast<std::size_t>(column)); }
  std::vector<Cell> cells_;
};

LockStatus row(std::string strategy, std::optional<std::int64_t> acquired, std::optional<std::int64_t> released) {
  LockStatus s;
  s.key = "k";
  s.strategy = std::move(strategy);
  s.acquired_at_ms = acquired;
  s.released_at_ms = released;
  s.token = acquired ? 1 : 0;
  return s;
}

constexpr rows::HolderVerdict live{.lease_live = true, .session_holds = false};
constexpr rows::HolderVerdict holds{.lease_live = false, .session_holds = true};
constexpr rows::HolderVerdict neither{};

std::string plain_epoch(std::string_view column) { return "ms(" + std::string(column) + ")"; }

}  // namespace

TEST_CASE("state rule: lease rows") {
  // Live: held, whatever else the row says (a released lease inside --min-hold is still held).
  CHECK(rows::state_of(row("lease", 1000, std::nullopt), live) == State::held);
  CHECK(rows::state_of(row("lease", 1000, 1500), live) == State::held);
  // Not live: never acquired, released, or the holder vanished.
  CHECK(rows::state_of(row("lease", std::nullopt, std::nullopt), neither) == State::free);
  CHECK(rows::state_of(row("lease", 1000, 1500), neither) == State::free);
  CHECK(rows::state_of(row("lease", 1000, std::nullopt), neither) == State::expired);
  // A release stamped before the acquisition (a stepped wall clock) is still a release:
  // acquisition clears released_at, so a set one was written after it.
  CHECK(rows::state_of(row("lease", 2000, 1500), neither) == State::free);
  // The session verdict means nothing for a lease.
  CHECK(rows::state_of(row("lease", 1000, std::nullopt), holds) == State::expired);
  // A row no strategy ever took (or an unknown one) follows the lease rule.
  CHECK(rows::state_of(row("", std::nullopt, std::nullopt), neither) == State::free);
  CHECK(rows::state_of(row("", std::nullopt, std::nullopt), live) == State::held);
}

TEST_CASE("state rule: session-strategy rows") {
  for (const char* strategy : {"advisory", "for-update", "txn-insert"}) {
    CAPTURE(strategy);
    CHECK(rows::state_of(row(strategy, 1000, std::nullopt), holds) == State::held);
    // The server no longer sees the session: a crashed holder is free, never expired.
    CHECK(rows::state_of(row(strategy, 1000, std::nullopt), neither) == State::free);
    // Released: free even while the session still shows the lock (it is letting go).
    CHECK(rows::state_of(row(strategy, 1000, 1500), holds) == State::free);
    CHECK(rows::state_of(row(strategy, 1000, 1500), neither) == State::free);
    // A lease verdict means nothing for a session lock.
    CHECK(rows::state_of(row(strategy, 1000, std::nullopt), live) == State::free);
  }
}

TEST_CASE("the status select list names every column in decode order, each timestamp through the dialect") {
  CHECK(rows::status_select_list(&plain_epoch, "now()") ==
        "name, owner, host, pid, token, strategy, ms(acquired_at), ms(renewed_at), ms(expires_at), ms(released_at), "
        "ms(last_started_at), ms(last_finished_at), last_exit_code, ms(now())");
  CHECK(rows::history_select_list(&plain_epoch) ==
        "id, name, token, owner, host, pid, strategy, ms(started_at), ms(finished_at), outcome, exit_code");
}

TEST_CASE("a status row decodes into LockStatus and is judged") {
  FakeRow lease({std::string("key"), std::string("o"), std::string("h"), std::int64_t{42}, std::int64_t{7},
                 std::string("lease"), std::int64_t{1000}, std::int64_t{1100}, std::int64_t{31000}, Cell{},
                 std::int64_t{1000}, std::int64_t{900}, std::int64_t{3}, std::int64_t{1200}});
  LockStatus s = rows::read_status(lease, live);
  CHECK(s.key == "key");
  CHECK(s.owner == "o");
  CHECK(s.host == "h");
  CHECK(s.pid == 42);
  CHECK(s.token == 7);
  CHECK(s.strategy == "lease");
  CHECK(s.acquired_at_ms == 1000);
  CHECK(s.renewed_at_ms == 1100);
  CHECK(s.expires_at_ms == 31000);
  CHECK_FALSE(s.released_at_ms.has_value());
  CHECK(s.last_started_at_ms == 1000);
  CHECK(s.last_finished_at_ms == 900);
  CHECK(s.last_exit_code == 3);
  CHECK(s.db_now_ms == 1200);
  CHECK(s.state == State::held);
  CHECK(rows::read_status(lease, neither).state == State::expired);

  // NULL holder columns read as empty / 0; a session strategy's row shows no expiry.
  FakeRow session({std::string("key"), Cell{}, Cell{}, Cell{}, std::int64_t{2}, std::string("advisory"),
                   std::int64_t{1000}, std::int64_t{1000}, std::int64_t{5000}, Cell{}, std::int64_t{1000}, Cell{},
                   Cell{}, std::int64_t{1200}});
  s = rows::read_status(session, holds);
  CHECK(s.owner.empty());
  CHECK(s.pid == 0);
  CHECK_FALSE(s.expires_at_ms.has_value());
  CHECK_FALSE(s.last_exit_code.has_value());
  CHECK(s.state == State::held);
}

TEST_CASE("status of given keys keeps the requested order; never-taken keys are free at token 0") {
  LockStatus b = row("lease", 1000, std::nullopt);
  b.key = "b";
  b.db_now_ms = 5000;
  b.state = State::held;
  LockStatus a = row("lease", 1000, 1500);
  a.key = "a";
  a.db_now_ms = 5000;
  int clock_reads = 0;
  auto clock = [&]() -> Result<std::int64_t> {
    ++clock_reads;
    return 9000;
  };

  const std::vector<std::string> keys{"b", "never", "a", "b"};
  auto out = rows::in_request_order({a, b}, keys, clock);
  REQUIRE(out.has_value());
  REQUIRE(out->size() == 4);
  CHECK((*out)[0].key == "b");
  CHECK((*out)[0].state == State::held);
  CHECK((*out)[1].key == "never");
  CHECK((*out)[1].state == State::free);
  CHECK((*out)[1].token == 0);
  CHECK((*out)[1].strategy.empty());
  CHECK((*out)[1].db_now_ms == 5000);  // a row read gave the database clock
  CHECK((*out)[2].key == "a");
  CHECK((*out)[3].key == "b");
  CHECK(clock_reads == 0);

  // Nothing found: the clock is read once, for every never-taken key.
  const std::vector<std::string> unknown{"x", "y"};
  out = rows::in_request_order({}, unknown, clock);
  REQUIRE(out.has_value());
  REQUIRE(out->size() == 2);
  CHECK((*out)[0].db_now_ms == 9000);
  CHECK((*out)[1].db_now_ms == 9000);
  CHECK(clock_reads == 1);

  // Every key: the rows as read, and no clock needed.
  out = rows::in_request_order({b, a}, {}, clock);
  REQUIRE(out.has_value());
  REQUIRE(out->size() == 2);
  CHECK((*out)[0].key == "b");
  CHECK(clock_reads == 1);

  // The clock's error comes through.
  auto broken = rows::in_request_order({}, unknown, []() -> Result<std::int64_t> {
    return fail(ErrorKind::connection, "down");
  });
  REQUIRE_FALSE(broken.has_value());
  CHECK(broken.error().kind == ErrorKind::connection);
}

TEST_CASE("a history row decodes into RunRecord") {
  FakeRow done({std::int64_t{12}, std::string("key"), std::int64_t{7}, std::string("o"), std::string("h"),
                std::int64_t{42}, std::string("lease"), std::int64_t{1000}, std::int64_t{4000}, std::string("max-hold"),
                std::int64_t{124}});
  RunRecord r = rows::decode_run(done);
  CHECK(r.id == 12);
  CHECK(r.key == "key");
  CHECK(r.token == 7);
  CHECK(r.owner == "o");
  CHECK(r.host == "h");
  CHECK(r.pid == 42);
  CHECK(r.strategy == "lease");
  CHECK(r.started_at_ms == 1000);
  CHECK(r.finished_at_ms == 4000);
  CHECK(r.outcome == RunOutcome::max_hold);
  CHECK(r.exit_code == 124);

  // NULLs, and an outcome this version does not know (a newer dblock's) reads `failed`.
  FakeRow odd({std::int64_t{13}, std::string("key"), std::int64_t{8}, Cell{}, Cell{}, Cell{}, Cell{}, Cell{}, Cell{},
               std::string("vanished"), Cell{}});
  r = rows::decode_run(odd);
  CHECK(r.owner.empty());
  CHECK(r.pid == 0);
  CHECK(r.started_at_ms == 0);
  CHECK_FALSE(r.finished_at_ms.has_value());
  CHECK(r.outcome == RunOutcome::failed);
  CHECK_FALSE(r.exit_code.has_value());
}

TEST_CASE("a holder selector is described for messages") {
  HolderSelector who;
  CHECK(rows::describe(who) == "anyone");
  who.owner = "cron@web1";
  CHECK(rows::describe(who) == "owner cron@web1");
  who.token = 42;
  CHECK(rows::describe(who) == "owner cron@web1 with token 42");
  who.owner.reset();
  CHECK(rows::describe(who) == "token 42");
  who.force = true;
  CHECK(rows::describe(who) == "anyone");
}

TEST_CASE("one strategy per key: which rows of another strategy refuse a take") {
  // Unreleased: a session holder (even a crashed one: fail closed), a live lease, a shedlock row.
  CHECK(rows::other_strategy_holds(row("advisory", 1000, std::nullopt), false, "lease"));
  CHECK(rows::other_strategy_holds(row("lease", 1000, std::nullopt), true, "for-update"));
  CHECK(rows::other_strategy_holds(row("shedlock", 1000, std::nullopt), false, "lease"));
  CHECK(rows::other_strategy_holds(row("lease", 1000, std::nullopt), true, "shedlock"));
  // Done: released, never acquired, a lease that is over; the same strategy; a semaphore's
  // header (refused by its own rule).
  CHECK_FALSE(rows::other_strategy_holds(row("advisory", 1000, 2000), false, "lease"));
  CHECK_FALSE(rows::other_strategy_holds(row("advisory", std::nullopt, std::nullopt), false, "lease"));
  CHECK_FALSE(rows::other_strategy_holds(row("lease", 1000, std::nullopt), false, "advisory"));
  CHECK_FALSE(rows::other_strategy_holds(row("txn-insert", 1000, std::nullopt), false, "txn-insert"));
  CHECK_FALSE(rows::other_strategy_holds(row("", 1000, std::nullopt), false, "lease"));
  CHECK_FALSE(rows::other_strategy_holds(row("semaphore", 1000, std::nullopt), true, "lease"));
  // The SQL states the same rule, over the row's alias, for the dialect's lease judgement.
  CHECK(rows::strategy_allows_sql("l.", ":strategy", "NOT live") ==
        "(COALESCE(l.strategy, :strategy) = :strategy OR l.released_at IS NOT NULL OR l.acquired_at IS NULL OR"
        " (l.strategy = 'lease' AND NOT live))");
}

// What `status` and `history` report, read back through the interface.

#include <algorithm>
#include <cstdlib>

#include "core/clock.hpp"

#include "conformance/conformance_helpers.hpp"

using namespace dblock;
using namespace dblock::conformance;

TEST_SUITE("all") {

TEST_CASE("status reports holder, token, times and last run") {
  Db db;
  const std::string key = test::unique_key("status");

  LockStatus never = db.status(key);
  CHECK(never.key == key);
  CHECK(never.state == LockStatus::State::free);
  CHECK(never.token == 0);
  CHECK(never.db_now_ms > 0);

  auto a = db.locker();
  const std::int64_t token = acquire(*a, request(key, "owner-a", 20s));
  LockStatus held = db.status(key);
  CHECK(held.key == key);
  CHECK(held.state == LockStatus::State::held);
  CHECK(held.owner == "owner-a");
  CHECK(held.host == "host-owner-a");
  CHECK(held.pid == 4242);
  CHECK(held.token == token);
  CHECK(held.strategy == to_string(test::strategy()));
  REQUIRE(held.acquired_at_ms.has_value());
  CHECK(held.db_now_ms >= *held.acquired_at_ms);
  CHECK(held.db_now_ms - *held.acquired_at_ms < 10'000);
  REQUIRE(held.last_started_at_ms.has_value());
  CHECK(*held.last_started_at_ms == *held.acquired_at_ms);
  CHECK_FALSE(held.released_at_ms.has_value());
  if (is_lease()) {
    REQUIRE(held.expires_at_ms.has_value());
    CHECK(*held.expires_at_ms - *held.acquired_at_ms >= 19'900);
    CHECK(*held.expires_at_ms - *held.acquired_at_ms <= 20'100);
  } else {
    CHECK_FALSE(held.expires_at_ms.has_value());
  }

  ReleaseRequest rel;
  rel.finished_run = true;
  rel.exit_code = 3;
  release(*a, rel);
  LockStatus after = eventually([&] { return db.status(key); }, [](const LockStatus& s) { return s.state == LockStatus::State::free; });
  CHECK(after.state == LockStatus::State::free);
  CHECK(after.owner == "owner-a");  // the last holder stays visible
  CHECK(after.token == token);
  REQUIRE(after.last_exit_code.has_value());
  CHECK(*after.last_exit_code == 3);
  REQUIRE(after.last_finished_at_ms.has_value());
  CHECK(*after.last_finished_at_ms >= *held.acquired_at_ms);
  REQUIRE(after.released_at_ms.has_value());
  CHECK(*after.released_at_ms >= *held.acquired_at_ms);

  // A release that is not the end of a run leaves last_* alone.
  auto b = db.locker();
  acquire(*b, request(key, "owner-b"));
  release(*b);
  LockStatus again = db.status(key);
  REQUIRE(again.last_exit_code.has_value());
  CHECK(*again.last_exit_code == 3);

  // All locks: this table holds exactly this key.
  auto all = db.backend->status({});
  REQUIRE(all.has_value());
  REQUIRE(all->size() == 1);
  CHECK(all->front().key == key);
}

TEST_CASE("status of several keys keeps their order and reports unknown keys free") {
  Db db;
  const std::string k1 = test::unique_key("s1");
  const std::string k2 = test::unique_key("s2");
  auto a = db.locker();
  acquire(*a, request(k2, "owner-a"));
  std::vector<std::string> keys{k1, k2};
  auto rows = db.backend->status(keys);
  REQUIRE(rows.has_value());
  REQUIRE(rows->size() == 2);
  CHECK((*rows)[0].key == k1);
  CHECK((*rows)[0].state == LockStatus::State::free);
  CHECK((*rows)[1].key == k2);
  CHECK((*rows)[1].state == LockStatus::State::held);
  release(*a);
}

namespace {

ReleaseRequest run_end(int exit_code, RunOutcome outcome, const std::string& owner) {
  ReleaseRequest rel;
  rel.finished_run = true;
  rel.exit_code = exit_code;
  RunRecord run;
  run.owner = owner;
  run.host = "host-" + owner;
  run.pid = 4242;
  run.strategy = std::string(to_string(test::strategy()));
  run.outcome = outcome;
  run.exit_code = exit_code;
  rel.history = run;
  return rel;
}

}  // namespace

TEST_CASE("history records runs newest first and prunes each key to history_keep") {
  Db db(3);
  const std::string key = test::unique_key("history");
  const std::string other = test::unique_key("history-other");

  auto a = db.locker();
  const std::int64_t other_token = acquire(*a, request(other, "owner-a"));
  const std::int64_t other_started = *db.status(other).acquired_at_ms;
  release(*a, run_end(0, RunOutcome::ok, "owner-a"));

  std::vector<std::int64_t> tokens;
  for (int i = 0; i < 5; ++i) {
    tokens.push_back(acquire(*a, request(key, "owner-a")));
    release(*a, run_end(i, i % 2 ? RunOutcome::failed : RunOutcome::ok, "owner-a"));
  }

  auto runs = eventually([&] { return db.backend->history(key, 100); },
                         [&](const auto& r) { return r && !r->empty() && r->front().token == tokens[4]; });
  REQUIRE(runs.has_value());
  REQUIRE(runs->size() == 3);
  for (std::size_t i = 0; i < runs->size(); ++i) {
    const RunRecord& r = (*runs)[i];
    CHECK(r.key == key);
    CHECK(r.token == tokens[4 - i]);
    CHECK(r.exit_code == std::optional<int>(static_cast<int>(4 - i)));
    CHECK(r.outcome == ((4 - i) % 2 ? RunOutcome::failed : RunOutcome::ok));
    CHECK(r.owner == "owner-a");
    CHECK(r.host == "host-owner-a");
    CHECK(r.pid == 4242);
    CHECK(r.strategy == to_string(test::strategy()));
    REQUIRE(r.finished_at_ms.has_value());
    CHECK(*r.finished_at_ms >= r.started_at_ms);
    if (i > 0) CHECK(r.id < (*runs)[i - 1].id);
  }

  auto limited = db.backend->history(key, 2);
  REQUIRE(limited.has_value());
  CHECK(limited->size() == 2);

  // Pruning is per key: the other key's single run is still there, and started_at is the
  // lock's acquired_at.
  auto other_runs = eventually([&] { return db.backend->history(other, 10); }, [](const auto& r) { return r && !r->empty(); });
  REQUIRE(other_runs.has_value());
  REQUIRE(other_runs->size() == 1);
  CHECK(other_runs->front().token == other_token);
  CHECK(other_runs->front().started_at_ms == other_started);

  auto all = db.backend->history("", 100);
  REQUIRE(all.has_value());
  CHECK(all->size() == 4);

  // --no-history: no row.
  acquire(*a, request(key, "owner-a"));
  ReleaseRequest quiet;
  quiet.finished_run = true;
  quiet.exit_code = 0;
  release(*a, quiet);
  auto after = db.backend->history(key, 100);
  REQUIRE(after.has_value());
  CHECK(after->front().token == tokens[4]);
}

TEST_CASE("a key's history grows to history_keep + history_keep/10 rows, then a run trims it to the newest history_keep") {
  // 20 + 2: a run that leaves 22 rows or fewer deletes none, so most runs of a key with a long
  // history never walk it (dblock(1), --history-keep).
  Db db(20);
  const std::string key = test::unique_key("trim");
  auto a = db.locker();
  std::vector<std::int64_t> tokens;
  auto kept = [&] {
    auto runs = db.backend->history(key, 100);
    REQUIRE(runs.has_value());
    std::vector<std::int64_t> out;
    for (const RunRecord& r : *runs) out.push_back(r.token);
    std::reverse(out.begin(), out.end());
    return out;
  };
  auto newest = [&](std::size_t n) { return std::vector<std::int64_t>(tokens.end() - n, tokens.end()); };
  auto run_once = [&] {
    tokens.push_back(acquire(*a, request(key, "owner-a")));
    release(*a, run_end(0, RunOutcome::ok, "owner-a"));
  };
  // Twice: from an empty history, then from a trimmed one (20 rows, 2 more runs before a trim).
  for (std::size_t upto : {22u, 25u}) {
    while (tokens.size() < upto) run_once();
    CHECK(eventually(kept, [&](const auto& k) { return k == newest(22); }) == newest(22));
    run_once();
    CHECK(eventually(kept, [&](const auto& k) { return k == newest(20); }) == newest(20));
  }
}

TEST_CASE("inspection creates nothing: without the tables, status, history and check_schema say there is no lock database") {
  Db existing;  // the database itself exists (SQLite: the file); this prefix has no tables
  BackendOptions inspect;
  inspect.table_prefix = test::unique_prefix();
  inspect.inspect = true;
  auto looking = test::open(inspect);
  const std::string key = test::unique_key("inspect");
  auto is_no_database = [](const Error& e) {
    CAPTURE(e.message);
    CHECK(e.kind == ErrorKind::other);
    CHECK(e.message.starts_with("no lock database at "));
    CHECK(e.message.ends_with("(nothing has run here yet, or the DSN is wrong; `dblock init` creates it)"));
  };
  for (int pass = 0; pass < 2; ++pass) {  // the second pass proves the first created nothing
    auto all = looking->status({});
    REQUIRE_FALSE(all.has_value());
    is_no_database(all.error());
    std::vector<std::string> keys{key};
    auto one = looking->status(keys);
    REQUIRE_FALSE(one.has_value());
    is_no_database(one.error());
    auto runs = looking->history(key, 10);
    REQUIRE_FALSE(runs.has_value());
    is_no_database(runs.error());
    auto shape = looking->check_schema();
    REQUIRE_FALSE(shape.has_value());
    is_no_database(shape.error());
  }
  BackendOptions writer = inspect;
  writer.inspect = false;
  auto creating = test::open(writer);
  REQUIRE(creating->ensure_schema().has_value());
  auto again = test::open(inspect);
  auto made = again->check_schema();
  CHECK_MESSAGE(made.has_value(), (made ? std::string() : made.error().message));
  std::vector<std::string> keys{key};
  auto free_now = again->status(keys);
  REQUIRE_MESSAGE(free_now.has_value(), (free_now ? std::string() : free_now.error().message));
  CHECK(free_now->front().state == LockStatus::State::free);
  CHECK(again->history(key, 10).has_value());
}

TEST_CASE("doctor reports one line per check, all ok on the test database, and a sane clock") {
  Db db;
  auto checks = db.backend->doctor_checks(test::strategy());
  REQUIRE(checks.size() >= 3);
  for (const auto& c : checks) {
    CAPTURE(c.name);
    CAPTURE(c.detail);
    MESSAGE(c.name, c.ok ? " ok: " : " FAIL: ", c.detail);
    CHECK_FALSE(c.name.empty());
    CHECK(c.ok);
    CHECK(c.detail.find('\n') == std::string::npos);
  }
  auto now = db.backend->now_ms();
  REQUIRE(now.has_value());
  CHECK(std::llabs(*now - wall_now_ms()) < 60'000);
}

}  // TEST_SUITE("all")

// The run path assumes the schema (src/core/backend.hpp, make_locker): a locker on a
// database without dblock's tables creates them on its first attempt, and a table of the wrong
// shape is still a config error naming the column, all without ensure_schema first.

#include "conformance/conformance_helpers.hpp"

using namespace dblock;
using namespace dblock::conformance;

namespace {

std::unique_ptr<Locker> locker_without_schema(Backend& backend) {
  auto made = backend.make_locker(test::strategy());
  REQUIRE_MESSAGE(made.has_value(), (made ? std::string() : made.error().message));
  return std::move(*made);
}

}  // namespace

TEST_SUITE("all") {

TEST_CASE("the first attempt on a database without the tables creates them and takes the lock") {
  BackendOptions options;
  options.table_prefix = test::unique_prefix();
  auto backend = test::open(options);
  auto locker = locker_without_schema(*backend);
  const std::string key = test::unique_key("fresh");
  const std::int64_t token = acquire(*locker, request(key, "a"));
  CHECK(token == 1);
  ReleaseRequest rel;
  rel.finished_run = true;
  RunRecord run;
  run.key = key;
  run.token = token;
  run.owner.assign(1, 'a');
  run.strategy = std::string(to_string(test::strategy()));
  run.outcome = RunOutcome::ok;
  rel.history = run;
  release(*locker, rel);
  locker.reset();
  backend.reset();

  // Another process finds the tables as the first one left them.
  auto other = test::open(options);
  auto again = other->ensure_schema();
  CHECK_MESSAGE(again.has_value(), (again ? std::string() : again.error().message));
  auto runs = eventually([&] { return other->history(key, 10); }, [](const auto& r) { return r && r->size() == 1; });
  REQUIRE(runs.has_value());
  REQUIRE(runs->size() == 1);
  CHECK(runs->front().token == token);
}

TEST_CASE("an attempt on a locks table of the wrong shape is a config error naming the column") {
  BackendOptions options;
  options.table_prefix = test::unique_prefix();
  const std::string table = options.table_prefix + "locks";
  test::admin_sql("CREATE TABLE " + table + " (name VARCHAR(255) PRIMARY KEY, owner VARCHAR(255))");
  {
    auto backend = test::open(options);
    auto made = backend->make_locker(test::strategy());
    Result<AcquireOutcome> out = made ? (*made)->try_acquire(request(test::unique_key("shape"), "a"), 0ms)
                                      : Result<AcquireOutcome>(std::unexpected(made.error()));
    REQUIRE_FALSE(out.has_value());
    CHECK(out.error().kind == ErrorKind::config);
    CHECK_MESSAGE(out.error().message.find("host") != std::string::npos, out.error().message);
  }
  test::admin_sql("DROP TABLE " + table);
}

}  // TEST_SUITE

// MySQL/MariaDB and semaphores (docs/backend-contract.md, "Semaphores" and "MySQL/MariaDB"): a
// locks table from before semaphores is read without the slots column and gains it only when a
// slot is first taken, never on inspection or for a plain lock.

#include "conformance/conformance_helpers.hpp"
#include "core/semaphore.hpp"

using namespace dblock;
using namespace dblock::conformance;

namespace {

int slot_count(const Db& db, const std::string& key) {
  auto n = db.backend->slot_count(key);
  REQUIRE_MESSAGE(n.has_value(), (n ? std::string() : n.error().message));
  return *n;
}

}  // namespace

TEST_CASE("semaphore: a locks table from before semaphores gets its slots column on the first slot taken" *
          doctest::test_suite("mysql")) {
  Db db;
  const std::string table = db.options.table_prefix + "locks";
  const std::string has_slots = "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND "
                                "TABLE_NAME = '" + table + "' AND COLUMN_NAME = 'slots'";
  test::admin_sql("ALTER TABLE " + table + " DROP COLUMN slots");
  const std::string key = test::unique_key("sem-old");

  // Inspection reads without the column and creates nothing; plain locks never need it.
  CHECK(slot_count(db, key) == 0);
  auto checked = db.backend->check_schema();
  CHECK_MESSAGE(checked.has_value(), (checked ? std::string() : checked.error().message));
  CHECK(test::admin_sql(has_slots) == "0");
  auto plain = db.locker();
  const std::int64_t plain_token = acquire(*plain, request(key, "owner-p"));
  release(*plain);
  CHECK(test::admin_sql(has_slots) == "0");

  auto a = make_semaphore_locker(db.locker(), 2);
  LockRequest slot = request(key, "owner-a");
  slot.slots = 2;
  AcquireOutcome got = attempt(*a, slot);
  REQUIRE(got.state == AcquireOutcome::State::acquired);
  CHECK(got.token > plain_token);
  CHECK(test::admin_sql(has_slots) == "1");
  CHECK(slot_count(db, key) == 2);
  release(*a);
}

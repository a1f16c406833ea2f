// SQLite-only behaviour the conformance suite cannot see: file handling, journal mode, table
// shape, busy timeout and the stored timestamp format.

#include <doctest/doctest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "backends/registry.hpp"
#include "core/clock.hpp"
#include "backends/common/dsn.hpp"
#include "backends/sqlite/sqlite_tables.hpp"
#include "support/temp_dir.hpp"

using namespace dblock;
using namespace std::chrono_literals;

namespace {

using test::TempDir;

Result<std::unique_ptr<Backend>> open_path(const std::string& path, const BackendOptions& options = {}) {
  auto dsn = parse_dsn("sqlite:" + path);
  REQUIRE(dsn.has_value());
  return open_backend(*dsn, options);
}

struct RawDb {
  explicit RawDb(const std::string& path) {
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &raw) == SQLITE_OK);
    db.reset(raw);
    REQUIRE(sqlite::add_functions(raw) == SQLITE_OK);  // what dblock's statements call
  }
  void exec(const std::string& sql) {
    char* msg = nullptr;
    int rc = sqlite3_exec(db.get(), sql.c_str(), nullptr, nullptr, &msg);
    std::string text = msg ? msg : "";
    sqlite3_free(msg);
    REQUIRE_MESSAGE(rc == SQLITE_OK, text);
  }
  std::string text(const std::string& sql) {
    sqlite3_stmt* raw = nullptr;
    REQUIRE(sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &raw, nullptr) == SQLITE_OK);
    std::unique_ptr<sqlite3_stmt, decltype(&sqlite3_finalize)> stmt(raw, &sqlite3_finalize);
    REQUIRE(sqlite3_step(stmt.get()) == SQLITE_ROW);
    const unsigned char* value = sqlite3_column_text(stmt.get(), 0);
    return value ? reinterpret_cast<const char*>(value) : "";
  }
  std::unique_ptr<sqlite3, decltype(&sqlite3_close)> db{nullptr, &sqlite3_close};
};

LockRequest request(const std::string& key) {
  LockRequest req;
  req.key = key;
  req.owner = "unit";
  req.host = "localhost";
  req.pid = 1;
  req.ttl = 30s;
  return req;
}

}  // namespace

TEST_CASE("sqlite: a table of the wrong shape is a config error naming the table and column") {
  TempDir dir;
  const std::string path = dir.path + "/shape.db";
  {
    RawDb raw(path);
    raw.exec("CREATE TABLE dblock_locks (name TEXT PRIMARY KEY, owner TEXT, token INTEGER)");
  }
  auto backend = open_path(path);
  REQUIRE(backend.has_value());
  auto ok = (*backend)->ensure_schema();
  REQUIRE_FALSE(ok.has_value());
  CHECK(ok.error().kind == ErrorKind::config);
  CHECK(ok.error().message.find("dblock_locks") != std::string::npos);
  CHECK(ok.error().message.find("column host") != std::string::npos);
}

TEST_CASE("sqlite: a runs table without the outcome column is named too") {
  TempDir dir;
  const std::string path = dir.path + "/runs.db";
  {
    RawDb raw(path);
    raw.exec("CREATE TABLE p_runs (id INTEGER PRIMARY KEY, name TEXT, token INTEGER, owner TEXT, host TEXT, "
             "pid INTEGER, strategy TEXT, started_at TEXT, finished_at TEXT, exit_code INTEGER)");
  }
  BackendOptions options;
  options.table_prefix = "p_";
  auto backend = open_path(path, options);
  REQUIRE(backend.has_value());
  auto ok = (*backend)->ensure_schema();
  REQUIRE_FALSE(ok.has_value());
  CHECK(ok.error().kind == ErrorKind::config);
  CHECK(ok.error().message.find("p_runs") != std::string::npos);
  CHECK(ok.error().message.find("column outcome") != std::string::npos);
}

TEST_CASE("sqlite: an uncreatable path is a connection error naming the path and the reason") {
  TempDir dir;
  const std::string blocker = dir.path + "/not-a-dir";
  std::ofstream(blocker) << "x";
  const std::string path = blocker + "/sub/x.db";
  // The default location: dblock makes the directories, and says why it cannot.
  BackendOptions default_location;
  default_location.create_directories = true;
  auto backend = open_path(path, default_location);
  REQUIRE_FALSE(backend.has_value());
  CHECK(backend.error().kind == ErrorKind::connection);
  CHECK(backend.error().message.find(path) != std::string::npos);
  CHECK(backend.error().message.find("Not a directory") != std::string::npos);
  // A DSN someone wrote: its directory must exist; a typo is a configuration error naming it.
  auto written = open_path(path);
  REQUIRE_FALSE(written.has_value());
  CHECK(written.error().kind == ErrorKind::config);
  CHECK(written.error().message.find("the directory " + blocker + "/sub ") != std::string::npos);
  auto missing = open_path(dir.path + "/typo/x.db");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().kind == ErrorKind::config);
  CHECK(missing.error().message.find("the directory " + dir.path + "/typo of the SQLite database " + dir.path +
                                     "/typo/x.db does not exist") != std::string::npos);
  CHECK(access((dir.path + "/typo").c_str(), F_OK) != 0);

  if (geteuid() != 0) {  // root writes anywhere, so permissions cannot be tested as root
    const std::string locked = dir.path + "/locked";
    REQUIRE(mkdir(locked.c_str(), 0500) == 0);
    auto denied = open_path(locked + "/x.db");
    REQUIRE_FALSE(denied.has_value());
    CHECK(denied.error().kind == ErrorKind::config);  // permission denied: the setup's to fix (78)
    CHECK(denied.error().message.find(locked + "/x.db") != std::string::npos);
    CHECK(denied.error().message.find("fix") != std::string::npos);
    CHECK(denied.error().message.find("Permission denied") != std::string::npos);

    const std::string readonly = dir.path + "/readonly.db";
    { RawDb raw(readonly); raw.exec("CREATE TABLE t (x)"); }
    REQUIRE(chmod(readonly.c_str(), 0444) == 0);
    auto ro = open_path(readonly);
    REQUIRE_FALSE(ro.has_value());
    CHECK(ro.error().kind == ErrorKind::config);
    CHECK(ro.error().message.find(readonly) != std::string::npos);
    CHECK(ro.error().message.find("chmod u+rw " + readonly) != std::string::npos);
  }
}

TEST_CASE("sqlite: the parent directory is created and the database is in WAL mode") {
  TempDir dir;
  const std::string path = dir.path + "/a/b/c/wal.db";
  BackendOptions default_location;  // only the default location's directories are made
  default_location.create_directories = true;
  auto backend = open_path(path, default_location);
  REQUIRE_MESSAGE(backend.has_value(), (backend ? std::string() : backend.error().message));
  REQUIRE((*backend)->ensure_schema().has_value());
  struct stat st{};
  REQUIRE(stat((dir.path + "/a/b/c").c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  const mode_t mask = umask(0);
  umask(mask);
  CHECK((st.st_mode & 0777) == (0755 & ~mask));

  RawDb raw(path);
  CHECK(raw.text("PRAGMA journal_mode") == "wal");

  auto checks = (*backend)->doctor_checks(Strategy::lease);
  bool saw_journal = false;
  for (const auto& check : checks) {
    CAPTURE(check.name);
    CAPTURE(check.detail);
    if (check.name == "journal_mode") saw_journal = true;
    if (check.name != "filesystem") CHECK(check.ok);  // the sandbox's /tmp may be anything
    CHECK_FALSE(check.detail.empty());
  }
  CHECK(saw_journal);
}

// A database that users share through a group is made under umask 002 (man page, SHARING A
// DATABASE FILE): its mode is 0666 less the umask, and SQLite gives the -wal and -shm the same.
// The default location never becomes group-writable, whatever the umask.
TEST_CASE("sqlite: a new database file takes the umask; the default location stays 0644") {
  TempDir dir;
  struct UmaskGuard {
    mode_t old = umask(002);
    ~UmaskGuard() { umask(old); }
  } guard;
  auto mode_of = [](const std::string& path) {
    struct stat st{};
    REQUIRE(stat(path.c_str(), &st) == 0);
    return st.st_mode & 07777;
  };
  const std::string shared = dir.path + "/shared.db";
  {
    auto backend = open_path(shared);
    REQUIRE_MESSAGE(backend.has_value(), (backend ? std::string() : backend.error().message));
    REQUIRE((*backend)->ensure_schema().has_value());
    for (const std::string& file : {shared, shared + "-wal", shared + "-shm"}) {
      CAPTURE(file);
      CHECK(mode_of(file) == 0664);
    }
  }
  const std::string state = dir.path + "/state";
  const std::string own = state + "/dblock/dblock.db";
  BackendOptions default_location;
  default_location.create_directories = true;
  default_location.private_root = state;
  auto backend = open_path(own, default_location);
  REQUIRE_MESSAGE(backend.has_value(), (backend ? std::string() : backend.error().message));
  REQUIRE((*backend)->ensure_schema().has_value());
  for (const std::string& file : {own, own + "-wal", own + "-shm"}) {
    CAPTURE(file);
    CHECK(mode_of(file) == 0644);
  }
}

TEST_CASE("sqlite: only the lease strategy, refused with a sentence naming the alternatives") {
  TempDir dir;
  auto backend = open_path(dir.path + "/strategies.db");
  REQUIRE(backend.has_value());
  for (Strategy s : {Strategy::advisory, Strategy::for_update, Strategy::txn_insert}) {
    auto locker = (*backend)->make_locker(s);
    REQUIRE_FALSE(locker.has_value());
    CHECK(locker.error().kind == ErrorKind::config);
    CHECK(locker.error().message.find("only the lease strategy") != std::string::npos);
    CHECK(locker.error().message.find("postgres://") != std::string::npos);
  }
  auto checks = (*backend)->doctor_checks(Strategy::advisory);
  bool refused = false;
  for (const auto& check : checks) refused = refused || (check.name == "strategy" && !check.ok);
  CHECK(refused);
  CHECK((*backend)->make_locker(Strategy::lease).has_value());
}

TEST_CASE("sqlite: schema_sql is the DDL ensure_schema runs, quoted, repeatable, without a claims table") {
  const BackendEntry* entry = load_backend("sqlite").value();
  REQUIRE(entry != nullptr);
  BackendOptions prefixed;
  prefixed.table_prefix = "pre_";
  const std::string ddl = entry->schema_sql(prefixed);
  CHECK(ddl.find("CREATE TABLE IF NOT EXISTS \"pre_locks\"") != std::string::npos);
  CHECK(ddl.find("CREATE TABLE IF NOT EXISTS \"pre_runs\"") != std::string::npos);
  CHECK(ddl.find("claims") == std::string::npos);

  TempDir dir;
  const std::string path = dir.path + "/ddl.db";
  {
    RawDb raw(path);
    raw.exec(ddl);
    raw.exec(ddl);
  }
  BackendOptions options;
  options.table_prefix = "pre_";
  auto backend = open_path(path, options);
  REQUIRE(backend.has_value());
  CHECK((*backend)->ensure_schema().has_value());
}

TEST_CASE("sqlite: a write lock held past the busy timeout is a connection error, not 'database is locked'") {
  TempDir dir;
  const std::string path = dir.path + "/busy.db";
  BackendOptions options;
  options.io_timeout = 300ms;
  auto backend = open_path(path, options);
  REQUIRE(backend.has_value());
  REQUIRE((*backend)->ensure_schema().has_value());
  auto locker = (*backend)->make_locker(Strategy::lease);
  REQUIRE(locker.has_value());

  RawDb blocker(path);
  blocker.exec("BEGIN IMMEDIATE");
  const Millis sent = boottime_now();
  auto out = (*locker)->try_acquire(request("busy-key"), 0ms);
  const Millis took = boottime_now() - sent;
  REQUIRE_FALSE(out.has_value());
  CHECK(out.error().kind == ErrorKind::connection);
  CHECK(out.error().message.find("busy timeout") != std::string::npos);
  CHECK(out.error().message.find(path) != std::string::npos);
  CHECK(out.error().message.find("database is locked") == std::string::npos);
  CHECK((out.error().native_code & 0xff) == SQLITE_BUSY);  // the extended result code travels on
  CHECK(took >= 250ms);
  CHECK(took < 5s);

  blocker.exec("ROLLBACK");
  auto later = (*locker)->try_acquire(request("busy-key"), 0ms);
  REQUIRE(later.has_value());
  CHECK(later->state == AcquireOutcome::State::acquired);
}

TEST_CASE("sqlite: timestamps are stored as readable UTC text with milliseconds") {
  TempDir dir;
  const std::string path = dir.path + "/time.db";
  auto backend = open_path(path);
  REQUIRE(backend.has_value());
  REQUIRE((*backend)->ensure_schema().has_value());
  auto locker = (*backend)->make_locker(Strategy::lease);
  REQUIRE(locker.has_value());
  auto out = (*locker)->try_acquire(request("time-key"), 0ms);
  REQUIRE(out.has_value());
  REQUIRE(out->state == AcquireOutcome::State::acquired);
  REQUIRE(out->acquired_at_ms.has_value());
  REQUIRE(out->expires_at_ms.has_value());
  CHECK(*out->expires_at_ms - *out->acquired_at_ms == 30'000);
  // Database time is the host's clock here; only a loose sanity check that it is UTC epoch ms.
  CHECK(std::llabs(*out->acquired_at_ms - wall_now_ms()) < 60'000);

  RawDb raw(path);
  const std::string stored = raw.text("SELECT acquired_at FROM dblock_locks WHERE name = 'time-key'");
  CHECK(std::regex_match(stored, std::regex(R"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3})")));
  const std::string expected_ms =
      raw.text("SELECT CAST(ROUND((julianday(acquired_at) - 2440587.5) * 86400000.0) AS INTEGER) FROM "
               "dblock_locks WHERE name = 'time-key'");
  CHECK(expected_ms == std::to_string(*out->acquired_at_ms));
}

TEST_CASE("sqlite: processes opening a fresh file at once all reach WAL and exactly one acquires") {
  TempDir dir;
  const std::string path = dir.path + "/fresh/race.db";
  constexpr int children = 6;
  int start[2];
  REQUIRE(pipe(start) == 0);
  std::vector<pid_t> pids;
  for (int i = 0; i < children; ++i) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      close(start[1]);
      char go = 0;
      if (read(start[0], &go, 1) != 1) _exit(3);
      BackendOptions default_location;
      default_location.create_directories = true;
      // A child that fails says why on stderr (the test's output), then exits 2.
      auto die = [](std::string_view step, const Error& e) {
        std::fprintf(stderr, "child %d: %.*s: %s (native code %d)\n", static_cast<int>(getpid()),
                     static_cast<int>(step.size()), step.data(), e.message.c_str(), e.native_code);
        _exit(2);
      };
      auto backend = open_path(path, default_location);
      if (!backend) die("open", backend.error());
      if (auto ok = (*backend)->ensure_schema(); !ok) die("ensure_schema", ok.error());
      auto locker = (*backend)->make_locker(Strategy::lease);
      if (!locker) die("make_locker", locker.error());
      auto out = (*locker)->try_acquire(request("process-race"), 0ms);
      if (!out) die("try_acquire", out.error());
      _exit(out->state == AcquireOutcome::State::acquired ? 0 : 1);
    }
    pids.push_back(pid);
  }
  close(start[0]);
  const std::string go(children, 'g');
  REQUIRE(write(start[1], go.data(), go.size()) == static_cast<ssize_t>(go.size()));
  close(start[1]);

  int acquired = 0, busy = 0, failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    switch (WEXITSTATUS(status)) {
      case 0: ++acquired; break;
      case 1: ++busy; break;
      default: ++failed; break;
    }
  }
  CHECK(acquired == 1);
  CHECK(busy == children - 1);
  CHECK(failed == 0);
  RawDb raw(path);
  CHECK(raw.text("PRAGMA journal_mode") == "wal");
  CHECK(raw.text("SELECT token FROM dblock_locks WHERE name = 'process-race'") == "1");
}

namespace {

// A lock row written directly, as another process (or an older dblock) would have left it.
// Wall-clock columns are SQLite datetime modifiers relative to this process's 'now'.
struct RowSpec {
  std::string expires = "+1 hour";   // wall-clock expiry
  std::string boot_id = "NULL";      // SQL literal
  std::string boot_token = "7";      // the row's token is 7
  std::string boot_started_ms = "NULL";
  std::string boot_expires_ms = "NULL";
};

void write_row(RawDb& raw, const std::string& key, const RowSpec& row) {
  raw.exec("INSERT INTO dblock_locks (name, owner, host, pid, token, strategy, acquired_at, renewed_at, expires_at,"
           " last_started_at, boot_id, boot_token, boot_started_ms, boot_expires_ms) VALUES ('" +
           key + "', 'other', 'h', 1, 7, 'lease', strftime('%Y-%m-%d %H:%M:%f', 'now', '-1 second'),"
           " strftime('%Y-%m-%d %H:%M:%f', 'now', '-1 second'), strftime('%Y-%m-%d %H:%M:%f', 'now', '" +
           row.expires + "'), strftime('%Y-%m-%d %H:%M:%f', 'now', '-1 second'), " + row.boot_id + ", " +
           row.boot_token + ", " + row.boot_started_ms + ", " + row.boot_expires_ms + ")");
}

std::string quoted(const std::string& text) { return "'" + text + "'"; }

struct LeaseDb {
  LeaseDb() : path(dir.path + "/boot.db") {
    auto opened = open_path(path);
    REQUIRE(opened.has_value());
    backend = std::move(*opened);
    REQUIRE(backend->ensure_schema().has_value());
  }
  LockStatus::State state(const std::string& key) {
    const std::string keys[] = {key};
    auto s = backend->status(keys);
    REQUIRE(s.has_value());
    REQUIRE(s->size() == 1);
    return s->front().state;
  }
  AcquireOutcome acquire(const std::string& key, Millis min_interval = 0ms) {
    auto locker = backend->make_locker(Strategy::lease);
    REQUIRE(locker.has_value());
    LockRequest req = request(key);
    req.min_interval = min_interval;
    auto out = (*locker)->try_acquire(req, 0ms);
    REQUIRE_MESSAGE(out.has_value(), (out ? std::string() : out.error().message));
    return *out;
  }
  TempDir dir;
  std::string path;
  std::unique_ptr<Backend> backend;
};

}  // namespace

TEST_CASE("sqlite: a lease row from an earlier boot is expired, whatever its wall-clock expiry says") {
  REQUIRE(boot_id().has_value());
  LeaseDb db;
  {
    RawDb raw(db.path);
    RowSpec row;
    row.boot_id = "'00000000-0000-0000-0000-000000000000'";
    row.boot_started_ms = std::to_string(boottime_now().count());
    row.boot_expires_ms = std::to_string(boottime_now().count() + 3'600'000);
    write_row(raw, "old-boot", row);
  }
  CHECK(db.state("old-boot") == LockStatus::State::expired);
  auto out = db.acquire("old-boot");
  CHECK(out.state == AcquireOutcome::State::acquired);
  CHECK(out.token == 8);
  RawDb raw(db.path);
  CHECK(raw.text("SELECT boot_id FROM dblock_locks WHERE name = 'old-boot'") == *boot_id());
  CHECK(raw.text("SELECT boot_token FROM dblock_locks WHERE name = 'old-boot'") == "8");
}

TEST_CASE("sqlite: the boot clock decides, not the wall clock, in both directions") {
  LeaseDb db;
  const std::int64_t boot_now = boottime_now().count();
  {
    RawDb raw(db.path);
    RowSpec ahead;  // as a competitor whose wall clock jumped an hour ahead sees a live lease
    ahead.expires = "-1 hour";
    ahead.boot_id = quoted(*boot_id());
    ahead.boot_started_ms = std::to_string(boot_now - 1000);
    ahead.boot_expires_ms = std::to_string(boot_now + 60'000);
    write_row(raw, "wall-past", ahead);
    RowSpec behind;  // written by a holder whose wall clock was an hour ahead, lease since over
    behind.expires = "+1 hour";
    behind.boot_id = quoted(*boot_id());
    behind.boot_started_ms = std::to_string(boot_now - 10'000);
    behind.boot_expires_ms = std::to_string(boot_now - 1);
    write_row(raw, "wall-future", behind);
  }
  CHECK(db.state("wall-past") == LockStatus::State::held);
  auto busy = db.acquire("wall-past");
  CHECK(busy.state == AcquireOutcome::State::busy);
  REQUIRE(busy.holder.has_value());
  CHECK(busy.holder->owner == "other");
  auto force = db.backend->release("wall-past", HolderSelector{std::nullopt, std::nullopt, true});
  REQUIRE(force.has_value());
  CHECK(db.state("wall-past") == LockStatus::State::free);

  CHECK(db.state("wall-future") == LockStatus::State::expired);
  CHECK(db.acquire("wall-future").state == AcquireOutcome::State::acquired);
}

TEST_CASE("sqlite: --min-interval counts on the boot clock within a boot") {
  LeaseDb db;
  const std::int64_t boot_now = boottime_now().count();
  {
    RawDb raw(db.path);
    RowSpec row;  // started 1 s ago by the boot clock; the wall clock says a day ago
    row.expires = "-1 day";
    row.boot_id = quoted(*boot_id());
    row.boot_started_ms = std::to_string(boot_now - 1000);
    row.boot_expires_ms = std::to_string(boot_now - 500);
    write_row(raw, "interval", row);
    raw.exec("UPDATE dblock_locks SET last_started_at = strftime('%Y-%m-%d %H:%M:%f', 'now', '-1 day'),"
             " released_at = strftime('%Y-%m-%d %H:%M:%f', 'now') WHERE name = 'interval'");
  }
  auto out = db.acquire("interval", Millis(3'600'000));
  CHECK(out.state == AcquireOutcome::State::not_due);
  REQUIRE(out.due_in.has_value());
  CHECK(*out.due_in > Millis(3'500'000));
  CHECK(*out.due_in <= Millis(3'600'000));
}

TEST_CASE("sqlite: a table of the previous version gains the boot columns, and its rows keep the wall-clock rule") {
  TempDir dir;
  const std::string path = dir.path + "/old.db";
  {
    RawDb raw(path);
    raw.exec("CREATE TABLE dblock_locks (name TEXT NOT NULL PRIMARY KEY, owner TEXT, host TEXT, pid INTEGER,"
             " token INTEGER NOT NULL DEFAULT 0, strategy TEXT, session_id TEXT, acquired_at TEXT, renewed_at TEXT,"
             " expires_at TEXT, released_at TEXT, last_started_at TEXT, last_finished_at TEXT,"
             " last_exit_code INTEGER)");
    raw.exec("INSERT INTO dblock_locks (name, owner, token, strategy, acquired_at, expires_at, last_started_at) VALUES"
             " ('held', 'old', 3, 'lease', strftime('%Y-%m-%d %H:%M:%f', 'now'),"
             " strftime('%Y-%m-%d %H:%M:%f', 'now', '+1 hour'), strftime('%Y-%m-%d %H:%M:%f', 'now')),"
             " ('lapsed', 'old', 4, 'lease', strftime('%Y-%m-%d %H:%M:%f', 'now', '-2 minutes'),"
             " strftime('%Y-%m-%d %H:%M:%f', 'now', '-1 minute'), strftime('%Y-%m-%d %H:%M:%f', 'now', '-2 minutes'))");
  }
  {
    // Inspection (status after an upgrade, before any run) reads the old rows read-only and
    // adds nothing.
    BackendOptions inspect;
    inspect.inspect = true;
    auto looking = open_path(path, inspect);
    REQUIRE(looking.has_value());
    const std::string both[] = {"held", "lapsed"};
    auto seen = (*looking)->status(both);
    REQUIRE_MESSAGE(seen.has_value(), (seen ? std::string() : seen.error().message));
    CHECK((*seen)[0].state == LockStatus::State::held);
    CHECK((*seen)[1].state == LockStatus::State::expired);
    REQUIRE((*looking)->status({}).has_value());
    RawDb raw(path);
    CHECK(raw.text("SELECT count(*) FROM pragma_table_info('dblock_locks')") == "14");
  }
  auto opened = open_path(path);
  REQUIRE(opened.has_value());
  auto& backend = *opened;
  REQUIRE(backend->ensure_schema().has_value());
  REQUIRE(backend->ensure_schema().has_value());  // a second run finds the columns and adds nothing
  RawDb raw(path);
  CHECK(raw.text("SELECT count(*) FROM pragma_table_info('dblock_locks') WHERE name LIKE 'boot\\_%' ESCAPE '\\'") ==
        "4");

  const std::string keys[] = {"held", "lapsed"};
  auto s = backend->status(keys);
  REQUIRE(s.has_value());
  CHECK((*s)[0].state == LockStatus::State::held);
  CHECK((*s)[1].state == LockStatus::State::expired);
  auto locker = backend->make_locker(Strategy::lease);
  REQUIRE(locker.has_value());
  auto busy = (*locker)->try_acquire(request("held"), 0ms);
  REQUIRE(busy.has_value());
  CHECK(busy->state == AcquireOutcome::State::busy);
  auto taken = (*locker)->try_acquire(request("lapsed"), 0ms);
  REQUIRE(taken.has_value());
  CHECK(taken->state == AcquireOutcome::State::acquired);
  CHECK(taken->token == 5);

  // Boot columns left behind by an earlier token (an older dblock took the row since) are stale:
  // the wall clock decides again.
  raw.exec("UPDATE dblock_locks SET boot_id = " + quoted(boot_id().value_or("x")) +
           ", boot_token = 2, boot_expires_ms = 0 WHERE name = 'held'");
  auto still = backend->status(std::span<const std::string>(keys, 1));
  REQUIRE(still.has_value());
  CHECK((*still)[0].state == LockStatus::State::held);
}

namespace {

// One finished run of `key` through the locker, with its history row.
void finished_run(Locker& locker, const std::string& key) {
  auto out = locker.try_acquire(request(key), 0ms);
  REQUIRE_MESSAGE(out.has_value(), (out ? std::string() : out.error().message));
  REQUIRE(out->state == AcquireOutcome::State::acquired);
  RunRecord run;
  run.key = key;
  run.token = out->token;
  run.owner = "unit";
  run.strategy = "lease";
  run.outcome = RunOutcome::ok;
  ReleaseRequest rel;
  rel.finished_run = true;
  rel.history = run;
  auto released = locker.release(rel);
  REQUIRE_MESSAGE(released.has_value(), (released ? std::string() : released.error().message));
}

// A lease locker on the database at `path` that keeps `keep` runs per key, and its backend.
struct KeepingLocker {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Locker> locker;
};
KeepingLocker keeping_locker(const std::string& path, int keep) {
  BackendOptions options;
  options.history_keep = keep;
  auto backend = open_path(path, options);
  REQUIRE(backend.has_value());
  auto locker = (*backend)->make_locker(Strategy::lease);
  REQUIRE(locker.has_value());
  return {std::move(*backend), std::move(*locker)};
}

}  // namespace

TEST_CASE("sqlite: each run trims its key's history to exactly the newest history_keep rows") {
  TempDir dir;
  const std::string path = dir.path + "/trim.db";
  {
    auto keeping = keeping_locker(path, 3);
    // Interleaved keys: one key's trim never touches the other's rows.
    for (int i = 0; i < 7; ++i) {
      finished_run(*keeping.locker, "a");
      if (i < 2) finished_run(*keeping.locker, "b");
      RawDb raw(path);
      CHECK(raw.text("SELECT count(*) FROM dblock_runs WHERE name = 'a'") == std::to_string(std::min(i + 1, 3)));
    }
  }
  RawDb raw(path);
  CHECK(raw.text("SELECT group_concat(token) FROM (SELECT token FROM dblock_runs WHERE name = 'a' ORDER BY id)") ==
        "5,6,7");
  CHECK(raw.text("SELECT group_concat(token) FROM (SELECT token FROM dblock_runs WHERE name = 'b' ORDER BY id)") ==
        "1,2");

  // A smaller --history-keep trims the excess at the key's next run.
  auto keeping = keeping_locker(path, 1);
  finished_run(*keeping.locker, "a");
  CHECK(raw.text("SELECT group_concat(token) FROM dblock_runs WHERE name = 'a'") == "8");
  CHECK(raw.text("SELECT count(*) FROM dblock_runs WHERE name = 'b'") == "2");
}

TEST_CASE("sqlite: a key whose history has greater tokens than its lock (its locks row was deleted) is trimmed") {
  // The rows cannot be counted by tokens then, so the run trims rather than let them grow.
  TempDir dir;
  const std::string path = dir.path + "/reset.db";
  auto keeping = keeping_locker(path, 20);
  finished_run(*keeping.locker, "c");
  RawDb raw(path);
  raw.exec("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 21)"
           " INSERT INTO dblock_runs (name, token, strategy, started_at, finished_at, outcome)"
           " SELECT 'c', 1000 + i, 'lease', '2020-01-01 00:00:00.000', '2020-01-01 00:00:01.000', 'ok' FROM n;"
           " DELETE FROM dblock_runs WHERE token = 1; DELETE FROM dblock_locks WHERE name = 'c'");
  finished_run(*keeping.locker, "c");
  CHECK(raw.text("SELECT count(*) FROM dblock_runs WHERE name = 'c'") == "20");
  CHECK(raw.text("SELECT max(id) = (SELECT id FROM dblock_runs WHERE token = 1) FROM dblock_runs") == "1");
}

TEST_CASE("sqlite: the run path upgrades a table of the previous version without ensure_schema") {
  TempDir dir;
  const std::string path = dir.path + "/old-run.db";
  {
    RawDb raw(path);
    raw.exec("CREATE TABLE dblock_locks (name TEXT NOT NULL PRIMARY KEY, owner TEXT, host TEXT, pid INTEGER,"
             " token INTEGER NOT NULL DEFAULT 0, strategy TEXT, session_id TEXT, acquired_at TEXT, renewed_at TEXT,"
             " expires_at TEXT, released_at TEXT, last_started_at TEXT, last_finished_at TEXT,"
             " last_exit_code INTEGER)");
    raw.exec("INSERT INTO dblock_locks (name, token) VALUES ('old', 41)");
  }
  auto backend = open_path(path);
  REQUIRE(backend.has_value());
  auto locker = (*backend)->make_locker(Strategy::lease);
  REQUIRE(locker.has_value());
  finished_run(**locker, "old");
  RawDb raw(path);
  CHECK(raw.text("SELECT token FROM dblock_locks WHERE name = 'old'") == "42");
  CHECK(raw.text("SELECT count(*) FROM pragma_table_info('dblock_locks') WHERE name LIKE 'boot\\_%' ESCAPE '\\'") ==
        "4");
  CHECK(raw.text("SELECT count(*) FROM dblock_runs WHERE name = 'old'") == "1");
}

TEST_CASE("sqlite: a statement error other than a missing table is not retried as one") {
  TempDir dir;
  const std::string path = dir.path + "/complete.db";
  auto backend = open_path(path);
  REQUIRE(backend.has_value());
  REQUIRE((*backend)->ensure_schema().has_value());
  {
    // A trigger that fails every acquisition with SQLITE_ERROR: the schema is complete, so the
    // error stands as it is, and ensure_schema (which would find nothing to do) is not the answer.
    RawDb raw(path);
    raw.exec("CREATE TRIGGER refuse BEFORE INSERT ON dblock_locks BEGIN SELECT RAISE(ABORT, 'refused'); END");
  }
  auto locker = (*backend)->make_locker(Strategy::lease);
  REQUIRE(locker.has_value());
  auto out = (*locker)->try_acquire(request("k"), 0ms);
  REQUIRE_FALSE(out.has_value());
  CHECK((out.error().native_code & 0xff) == SQLITE_CONSTRAINT);
}

TEST_CASE("sqlite: ensure_schema on a complete schema writes nothing, and closing keeps the WAL") {
  TempDir dir;
  const std::string path = dir.path + "/quiet.db";
  {
    auto backend = open_path(path);
    REQUIRE(backend.has_value());
    REQUIRE((*backend)->ensure_schema().has_value());
  }
  // Closing left the WAL in place (no checkpoint and delete at every close).
  CHECK(std::filesystem::exists(path + "-wal"));
  const auto wal_size = std::filesystem::file_size(path + "-wal");
  {
    auto backend = open_path(path);
    REQUIRE(backend.has_value());
    REQUIRE((*backend)->ensure_schema().has_value());
  }
  CHECK(std::filesystem::file_size(path + "-wal") == wal_size);
  RawDb raw(path);
  CHECK(raw.text("SELECT count(*) FROM sqlite_master WHERE name IN ('dblock_locks', 'dblock_runs', "
                 "'dblock_runs_name_id')") == "3");
}

// One fsync per run (sqlite_statements.cpp, begin_release): the release's transaction commits at
// synchronous=NORMAL, and the session is at FULL again once it has ended, committed or not, so
// an acquisition on the same connection afterwards is durable.
TEST_CASE("sqlite: only the release's transaction is unsynced; FULL is back once it ends") {
  TempDir dir;
  auto conn = sqlite::Connection::open(dir.path + "/sync.db", 1000ms);
  REQUIRE(conn.has_value());
  auto shared = std::make_shared<const sqlite::Connection>(std::move(*conn));
  sqlite::Session session(shared);
  auto level = [&] {
    auto got = shared->read_one("PRAGMA synchronous", "reading synchronous");
    REQUIRE(got.has_value());
    REQUIRE(got->has_value());
    return std::stoll(**got);
  };
  constexpr std::int64_t normal = 1, full = 2;
  const sql::LeaseStatements statements = sqlite::lease_statements("dblock_");
  CHECK(level() == full);
  {
    auto tx = sql::Transaction::begin(session, statements.begin_release);
    REQUIRE(tx.has_value());
    CHECK(level() == normal);
    CHECK(tx->commit().has_value());
  }
  CHECK(level() == full);
  {
    auto tx = sql::Transaction::begin(session, statements.begin_release);
    REQUIRE(tx.has_value());
    CHECK(level() == normal);
  }  // rolled back
  CHECK(level() == full);
  {
    auto tx = sql::Transaction::begin(session, statements.begin);
    REQUIRE(tx.has_value());
    CHECK(level() == full);
  }
}

TEST_CASE("sqlite: epoch ms through julianday equals the text's seconds and milliseconds") {
  // epoch_ms_sql (sqlite_connection.cpp) against the strftime('%s') and strftime('%f') form it
  // replaced, at every millisecond of a second and across four centuries; NULL stays NULL.
  TempDir dir;
  RawDb db(dir.path + "/epoch.db");
  const std::string x = "strftime('%Y-%m-%d %H:%M:%f', (:b + value * 4111) / 1000.0, 'unixepoch')";
  for (const char* base : {"0", "946684799000", "1764000000000", "4102444800000", "253402000000000"}) {
    std::string sql = "WITH RECURSIVE n(value) AS (SELECT 0 UNION ALL SELECT value + 1 FROM n WHERE value < 20000) "
                      "SELECT count(*) FROM n WHERE " + sqlite::epoch_ms_sql(x) + " IS NOT (CAST(strftime('%s', " + x +
                      ") AS INTEGER) * 1000 + CAST(substr(strftime('%f', " + x + "), 4, 3) AS INTEGER))";
    for (std::size_t at; (at = sql.find(":b")) != std::string::npos;) sql.replace(at, 2, base);
    CHECK_MESSAGE(db.text(sql) == "0", base);
  }
  CHECK(db.text("SELECT " + sqlite::epoch_ms_sql("NULL") + " IS NULL") == "1");
  CHECK(db.text("SELECT " + sqlite::epoch_ms_sql(sqlite::now_sql()) + " - (CAST(strftime('%s', 'now') AS INTEGER) * 1000) BETWEEN 0 AND 999") == "1");
}

TEST_CASE("sqlite: ms_between and julianday's order equal the epoch milliseconds' difference and order") {
  // ms_between_sql and lease_live's comparison (sqlite_statements.cpp) against epoch_ms_sql of
  // each side: pairs of times a prime number of milliseconds apart (0 to about 80 s, either way),
  // from 1970 to 9999.
  TempDir dir;
  RawDb db(dir.path + "/between.db");
  const std::string a = "strftime('%Y-%m-%d %H:%M:%f', (:b + value * 4111) / 1000.0, 'unixepoch')";
  const std::string b = "strftime('%Y-%m-%d %H:%M:%f', (:b + value * 4111 + (value % 41 - 20) * 3989) / 1000.0, 'unixepoch')";
  for (const char* base : {"0", "946684799000", "1764000000000", "4102444800000", "253402000000000"}) {
    std::string sql = "WITH RECURSIVE n(value) AS (SELECT 0 UNION ALL SELECT value + 1 FROM n WHERE value < 20000) "
                      "SELECT count(*) FROM n WHERE " + sqlite::ms_between_sql(a, b) + " IS NOT (" +
                      sqlite::epoch_ms_sql(b) + " - " + sqlite::epoch_ms_sql(a) + ") OR (julianday(" + b +
                      ") > julianday(" + a + ")) IS NOT (" + sqlite::epoch_ms_sql(b) + " > " + sqlite::epoch_ms_sql(a) + ")";
    for (std::size_t at; (at = sql.find(":b")) != std::string::npos;) sql.replace(at, 2, base);
    CHECK_MESSAGE(db.text(sql) == "0", base);
  }
  CHECK(db.text("SELECT " + sqlite::ms_between_sql("NULL", "'now'") + " IS NULL") == "1");
}

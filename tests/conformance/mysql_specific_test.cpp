// MySQL/MariaDB-specific checks, run in the conformance.mysql.* cells for the strategy under
// test: keys of 255 bytes of mixed UTF-8, fencing after KILL CONNECTION of a holder,
// wait_timeout on the server, and connect errors that never show the password.
#include <doctest/doctest.h>

#include <chrono>
#include <fcntl.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <map>
#include <thread>

#include "backends/mysql/mysql_dsn.hpp"
#include "backends/mysql/mysql_connection.hpp"
#include "backends/registry.hpp"
#include "core/clock.hpp"
#include "support/test_env.hpp"

using namespace dblock;
using namespace std::chrono_literals;

namespace {

bool is_mysql() { return test::backend_name() == "mysql"; }

Dsn parsed_dsn() {
  auto d = parse_dsn(test::dsn());
  REQUIRE(d);
  return *d;
}

// A backend on fresh tables, dropped again at the end.
struct Fixture {
  BackendOptions options;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<mysql::Connection> admin;

  Fixture() {
    options.table_prefix = test::unique_prefix();
    options.io_timeout = Millis(5000);
    backend = test::open(options);
    REQUIRE(backend->ensure_schema());
    auto c = mysql::Connection::open(parsed_dsn(), options);
    REQUIRE(c);
    admin = std::move(*c);
  }
  ~Fixture() {
    for (const char* t : {"locks", "runs", "claims"})
      (void)admin->query("DROP TABLE IF EXISTS `" + options.table_prefix + t + "`");
  }
  std::unique_ptr<Locker> locker() {
    auto l = backend->make_locker(test::strategy());
    REQUIRE(l);
    return std::move(*l);
  }
  LockStatus status_of(const std::string& key) {
    std::vector<std::string> keys{key};
    auto s = backend->status(keys);
    REQUIRE(s);
    REQUIRE(s->size() == 1);
    return s->front();
  }
  std::string session_id(const std::string& key) {
    auto r = admin->execute("SELECT session_id FROM `" + options.table_prefix + "locks` WHERE name = ?",
                            {std::string_view(key)});
    REQUIRE(r);
    REQUIRE(r->rows.size() == 1);
    return r->rows[0][0].value_or("");
  }
};

// Server session ids of this process's own TCP connections (PROCESSLIST's HOST is
// "127.0.0.1:<our local port>"), so a test can KILL its own locker's connection and never a
// parallel test's: local ports of our sockets come from /proc/net/tcp matched by inode.
std::set<std::string> own_sessions(mysql::Connection& admin) {
  std::set<std::string> inodes;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(entry.path(), ec).string();
    if (!ec && target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  std::set<std::string> ports;
  for (const char* table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::vector<std::string> f{std::istream_iterator<std::string>(fields), {}};
      if (f.size() > 9 && inodes.count(f[9]))
        ports.insert(std::to_string(std::stoul(f[1].substr(f[1].find(':') + 1), nullptr, 16)));
    }
  }
  std::set<std::string> ids;
  auto rows = admin.execute("SELECT ID, HOST FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()");
  REQUIRE(rows);
  for (const auto& row : rows->rows) {
    const std::string host = row[1].value_or("");
    const auto colon = host.rfind(':');
    if (colon != std::string::npos && ports.count(host.substr(colon + 1))) ids.insert(*row[0]);
  }
  return ids;
}

LockRequest request(const std::string& key, const std::string& owner) {
  LockRequest req;
  req.key = key;
  req.owner = owner;
  req.host = "testhost";
  req.pid = 4242;
  req.ttl = Millis(30000);
  return req;
}

}  // namespace

TEST_CASE("mysql: acquire, busy, release, token grows, status follows") {
  if (!is_mysql()) return;
  Fixture f;
  const std::string key = test::unique_key("basic");
  auto a = f.locker();
  auto b = f.locker();
  auto first = a->try_acquire(request(key, "a"), 0ms);
  REQUIRE(first);
  REQUIRE(first->state == AcquireOutcome::State::acquired);
  CHECK(first->token == 1);
  CHECK(f.status_of(key).state == LockStatus::State::held);

  const auto sent = boottime_now();
  auto busy = b->try_acquire(request(key, "b"), 0ms);
  const auto took = boottime_now() - sent;
  REQUIRE(busy);
  CHECK(busy->state == AcquireOutcome::State::busy);
  CHECK(took < 1000ms);
  MESSAGE(to_string(test::strategy()), ": nonblocking busy answer in ", took.count(), " ms");
  REQUIRE(busy->holder);
  CHECK(busy->holder->owner == "a");
  auto held = f.status_of(key);  // the refused attempt changed nothing
  CHECK(held.owner == "a");
  CHECK(held.token == 1);
  CHECK(held.last_started_at_ms == held.acquired_at_ms);

  CHECK(a->renew(Millis(30000)));
  ReleaseRequest rel;
  rel.finished_run = true;
  rel.exit_code = 3;
  RunRecord run;
  run.key = key;
  run.token = first->token;
  run.owner = "a";
  run.host = "testhost";
  run.pid = 4242;
  run.strategy = std::string(to_string(test::strategy()));
  run.outcome = RunOutcome::failed;
  run.exit_code = 3;
  rel.history = run;
  REQUIRE(a->release(rel));
  auto freed = f.status_of(key);
  CHECK(freed.state == LockStatus::State::free);
  CHECK(freed.last_exit_code == 3);

  auto second = b->try_acquire(request(key, "b"), 0ms);
  REQUIRE(second);
  REQUIRE(second->state == AcquireOutcome::State::acquired);
  CHECK(second->token == 2);
  auto retaken = f.status_of(key);
  CHECK(retaken.owner == "b");
  CHECK(retaken.last_started_at_ms == retaken.acquired_at_ms);
  CHECK(*retaken.last_started_at_ms > *held.last_started_at_ms);
  CHECK(retaken.state == LockStatus::State::held);
  CHECK(b->release(ReleaseRequest{}));
  CHECK_FALSE(b->release(ReleaseRequest{}));

  auto hist = f.backend->history(key, 10);
  REQUIRE(hist);
  REQUIRE(hist->size() == 1);
  CHECK(hist->front().outcome == RunOutcome::failed);
  CHECK(hist->front().exit_code == 3);
  CHECK(hist->front().started_at_ms > 0);
}

TEST_CASE("mysql: a key of 255 bytes of mixed UTF-8 works for the strategy") {
  if (!is_mysql()) return;
  Fixture f;
  std::string key;
  const std::string pieces[] = {"a", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x94\x92"};  // 1-4 byte sequences
  for (int i = 0; key.size() < 245; ++i) key += pieces[i % 4];
  while (key.size() < 255) key += "z";
  REQUIRE(key.size() == 255);
  std::string sibling = key;
  sibling.back() = 'y';  // differs in the last byte only: must be a different lock

  auto a = f.locker();
  auto b = f.locker();
  auto got = a->try_acquire(request(key, "a"), 0ms);
  if (!got) std::fprintf(stderr, "%s\n", got.error().message.c_str());
  REQUIRE(got);
  CHECK(got->state == AcquireOutcome::State::acquired);
  auto other = b->try_acquire(request(key, "b"), 0ms);
  REQUIRE(other);
  CHECK(other->state == AcquireOutcome::State::busy);
  auto sib = b->try_acquire(request(sibling, "b"), 0ms);
  REQUIRE(sib);
  CHECK(sib->state == AcquireOutcome::State::acquired);
  CHECK(f.status_of(key).key == key);
  CHECK(f.status_of(key).state == LockStatus::State::held);
  CHECK(a->release(ReleaseRequest{}));
  CHECK(b->release(ReleaseRequest{}));
}

TEST_CASE("mysql: min-interval answers not_due with the time left") {
  if (!is_mysql()) return;
  Fixture f;
  const std::string key = test::unique_key("interval");
  auto a = f.locker();
  REQUIRE(a->try_acquire(request(key, "a"), 0ms)->state == AcquireOutcome::State::acquired);
  REQUIRE(a->release(ReleaseRequest{}));
  auto req = request(key, "a");
  req.min_interval = Millis(60000);
  auto again = a->try_acquire(req, 0ms);
  REQUIRE(again);
  CHECK(again->state == AcquireOutcome::State::not_due);
  REQUIRE(again->due_in);
  CHECK(*again->due_in > Millis(50000));
  CHECK(*again->due_in <= Millis(60000));
  // The server lock was given back: another holder can take the key without min-interval.
  auto b = f.locker();
  auto other = b->try_acquire(request(key, "b"), 0ms);
  REQUIRE(other);
  CHECK(other->state == AcquireOutcome::State::acquired);
  CHECK(other->token == 2);
}

TEST_CASE("mysql: KILL CONNECTION of a session holder: renew is lost, status free, next token higher") {
  if (!is_mysql() || !is_session_strategy(test::strategy())) return;
  Fixture f;
  const std::string key = test::unique_key("killed");
  auto a = f.locker();
  auto got = a->try_acquire(request(key, "a"), 0ms);
  REQUIRE(got);
  REQUIRE(got->state == AcquireOutcome::State::acquired);
  const std::string sid = f.session_id(key);
  REQUIRE_FALSE(sid.empty());
  REQUIRE(f.admin->query("KILL CONNECTION " + sid));

  bool freed = false;
  for (int i = 0; i < 50 && !freed; ++i) {
    freed = f.status_of(key).state == LockStatus::State::free;
    if (!freed) std::this_thread::sleep_for(100ms);
  }
  CHECK(freed);
  auto b = f.locker();
  auto taken = b->try_acquire(request(key, "b"), 2000ms);
  REQUIRE(taken);
  REQUIRE(taken->state == AcquireOutcome::State::acquired);
  CHECK(taken->token > got->token);
  auto renewed = a->renew(Millis(30000));
  REQUIRE_FALSE(renewed);
  CHECK(renewed.error().kind == ErrorKind::lost);
  CHECK(b->renew(Millis(30000)));
  CHECK(b->release(ReleaseRequest{}));
}

TEST_CASE("mysql: a waiting acquirer gets the lock when the holder lets go") {
  if (!is_mysql() || !is_session_strategy(test::strategy())) return;
  Fixture f;
  const std::string key = test::unique_key("wait");
  auto a = f.locker();
  auto b = f.locker();
  REQUIRE(a->try_acquire(request(key, "a"), 0ms)->state == AcquireOutcome::State::acquired);
  std::thread releaser([&] {
    std::this_thread::sleep_for(300ms);
    (void)a->release(ReleaseRequest{});
  });
  const auto sent = boottime_now();
  auto got = b->try_acquire(request(key, "b"), 3000ms);
  const auto took = boottime_now() - sent;
  releaser.join();
  REQUIRE(got);
  CHECK(got->state == AcquireOutcome::State::acquired);
  CHECK(took < 2900ms);
  CHECK(b->release(ReleaseRequest{}));
}

TEST_CASE("mysql: a server wait_timeout of 2 s does not drop a held lock over 5 s") {
  if (!is_mysql()) return;
  Fixture f;
  auto before = f.admin->execute("SELECT @@GLOBAL.wait_timeout");
  REQUIRE(before);
  const std::string saved = before->rows.at(0).at(0).value_or("28800");
  if (!f.admin->query("SET GLOBAL wait_timeout = 2")) {
    MESSAGE("no privilege for SET GLOBAL wait_timeout: skipped");
    return;
  }
  const std::string key = test::unique_key("idle");
  std::unique_ptr<Locker> a;
  Result<AcquireOutcome> got = fail(ErrorKind::internal, "not run");
  a = f.locker();  // connections opened while the server says 2 s
  got = a->try_acquire(request(key, "a"), 0ms);
  (void)f.admin->query("SET GLOBAL wait_timeout = " + saved);
  REQUIRE(got);
  REQUIRE(got->state == AcquireOutcome::State::acquired);
  std::this_thread::sleep_for(5s);
  CHECK(a->renew(Millis(30000)));
  CHECK(f.status_of(key).state == LockStatus::State::held);
  CHECK(a->release(ReleaseRequest{}));
}

TEST_CASE("mysql: connect errors are classified and never show the password") {
  if (!is_mysql() || test::strategy() != Strategy::lease) return;
  const Dsn good = parsed_dsn();
  const mysql::MysqlDsn parts = mysql::parse_mysql_dsn(good).value();
  BackendOptions options;
  options.connect_timeout = Millis(2000);
  const std::string secret = "Wr0ng-Pa55word-xyz";
  auto text = [&](const std::string& password, const std::string& host, unsigned port, const std::string& db) {
    return parse_dsn("mysql://" + parts.user + ":" + password + "@" + host + ":" + std::to_string(port) + "/" + db)
        .value();
  };
  const std::string host = parts.host.empty() ? "127.0.0.1" : parts.host;
  const unsigned port = parts.port.value_or(3306);
  const std::string password = parts.password.value_or("");

  auto r1 = open_backend(text(secret, host, port, parts.database), options);
  REQUIRE_FALSE(r1);
  CHECK(r1.error().kind == ErrorKind::config);
  CHECK(r1.error().message.find(secret) == std::string::npos);
  if (!password.empty()) CHECK(r1.error().message.find(password) == std::string::npos);

  auto r2 = open_backend(text(password, host, port, "dblock_no_such_db"), options);
  REQUIRE_FALSE(r2);
  CHECK((r2.error().kind == ErrorKind::config || r2.error().kind == ErrorKind::connection));
  if (!password.empty()) CHECK(r2.error().message.find(password) == std::string::npos);

  const auto sent = boottime_now();
  auto r3 = open_backend(text(password, "127.0.0.1", 1, parts.database), options);  // nothing listens on port 1
  REQUIRE_FALSE(r3);
  CHECK(r3.error().kind == ErrorKind::connection);
  CHECK(boottime_now() - sent < 5000ms);
  if (!password.empty()) CHECK(r3.error().message.find(password) == std::string::npos);
  MESSAGE("wrong password: ", r1.error().message);
  MESSAGE("unknown database: ", r2.error().message);
  MESSAGE("closed port: ", r3.error().message);
}

TEST_CASE("mysql: a table of the wrong shape is a config error naming the column") {
  if (!is_mysql() || test::strategy() != Strategy::lease) return;
  BackendOptions options;
  options.table_prefix = test::unique_prefix();
  auto admin = mysql::Connection::open(parsed_dsn(), options);
  REQUIRE(admin);
  REQUIRE((*admin)->query("CREATE TABLE `" + options.table_prefix + "locks` (name VARBINARY(255) PRIMARY KEY, owner VARCHAR(255))"));
  auto backend = test::open(options);
  auto r = backend->ensure_schema();
  REQUIRE_FALSE(r);
  CHECK(r.error().kind == ErrorKind::config);
  CHECK(r.error().message.find("'host'") != std::string::npos);
  for (const char* t : {"locks", "runs", "claims"})
    (void)(*admin)->query("DROP TABLE IF EXISTS `" + options.table_prefix + t + "`");
}

TEST_CASE("mysql: doctor reports one line per check") {
  if (!is_mysql()) return;
  Fixture f;
  auto checks = f.backend->doctor_checks(test::strategy());
  REQUIRE(checks.size() >= 4);
  for (const auto& c : checks) {
    const std::string line = c.name + (c.ok ? " ok: " : " FAIL: ") + c.detail;
    MESSAGE(line);
    CHECK(c.detail.find('\n') == std::string::npos);
  }
  CHECK(checks[1].ok);  // privileges on our own fresh tables
}

// Statements each lease call sends, from the server's global counters (for the record; other
// sessions on a shared server would disturb the numbers, so this only reports them).
TEST_CASE("mysql: statements per lease acquire, renew and release") {
  if (!is_mysql() || test::strategy() != Strategy::lease) return;
  Fixture f;
  auto counters = [&] {
    auto r = f.admin->execute(
        "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN "
        "('QUESTIONS', 'COM_STMT_PREPARE', 'COM_STMT_EXECUTE')");
    REQUIRE(r);
    std::map<std::string, long long> out;
    for (const auto& row : r->rows) out[*row[0]] = std::stoll(*row[1]);
    return out;
  };
  auto report = [&](const char* what, const std::map<std::string, long long>& before) {
    auto after = counters();
    // The counters query itself is one question and one execute.
    const std::string line = std::string(what) + ": questions " + std::to_string(after["QUESTIONS"] - before.at("QUESTIONS") - 1) +
                             ", prepares " + std::to_string(after["COM_STMT_PREPARE"] - before.at("COM_STMT_PREPARE")) +
                             ", executes " + std::to_string(after["COM_STMT_EXECUTE"] - before.at("COM_STMT_EXECUTE") - 1);
    MESSAGE(line);
  };
  const std::string key = test::unique_key("count");
  auto a = f.locker();
  auto c0 = counters();
  REQUIRE(a->try_acquire(request(key, "a"), 0ms)->state == AcquireOutcome::State::acquired);
  report("first acquire (insert)", c0);
  auto c1 = counters();
  REQUIRE(a->renew(Millis(30000)));
  report("renew", c1);
  auto c2 = counters();
  REQUIRE(a->release(ReleaseRequest{}));
  report("release", c2);
  auto c3 = counters();
  REQUIRE(a->try_acquire(request(key, "a"), 0ms)->state == AcquireOutcome::State::acquired);
  report("second acquire (takeover, cached statement)", c3);
  auto b = f.locker();
  auto c4 = counters();
  REQUIRE(b->try_acquire(request(key, "b"), 0ms)->state == AcquireOutcome::State::busy);
  report("busy acquire (cold path reads the holder)", c4);
  CHECK(a->release(ReleaseRequest{}));
}

TEST_CASE("mysql: a lease survives KILL CONNECTION of its connection: renew reconnects, token compared") {
  if (!is_mysql() || test::strategy() != Strategy::lease) return;
  Fixture f;
  const std::string key = test::unique_key("lease-kill");
  const auto before = own_sessions(*f.admin);
  auto a = f.locker();
  auto got = a->try_acquire(request(key, "a"), 0ms);
  REQUIRE(got);
  REQUIRE(got->state == AcquireOutcome::State::acquired);
  std::vector<std::string> fresh;
  for (const auto& id : own_sessions(*f.admin))
    if (!before.count(id)) fresh.push_back(id);
  if (fresh.size() != 1) {
    MESSAGE("cannot tell the lease locker's session (not on TCP?): skipped");
    return;
  }
  REQUIRE(f.admin->query("KILL CONNECTION " + fresh.front()));
  CHECK(a->renew(Millis(30000)));
  CHECK(f.status_of(key).state == LockStatus::State::held);
  // Someone else's takeover (here: a forced release and a new holder) makes renew lost.
  std::vector<std::string> keys{key};
  HolderSelector force;
  force.force = true;
  REQUIRE(f.backend->release(key, force));
  auto b = f.locker();
  auto taken = b->try_acquire(request(key, "b"), 0ms);
  REQUIRE(taken);
  REQUIRE(taken->state == AcquireOutcome::State::acquired);
  CHECK(taken->token == got->token + 1);
  auto renewed = a->renew(Millis(30000));
  REQUIRE_FALSE(renewed);
  CHECK(renewed.error().kind == ErrorKind::lost);
}

TEST_CASE("mysql: release --force of a session holder ends its session") {
  if (!is_mysql() || !is_session_strategy(test::strategy())) return;
  Fixture f;
  const std::string key = test::unique_key("force");
  auto a = f.locker();
  REQUIRE(a->try_acquire(request(key, "a"), 0ms)->state == AcquireOutcome::State::acquired);
  HolderSelector wrong;
  wrong.owner = "somebody-else";
  auto refused = f.backend->release(key, wrong);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().kind == ErrorKind::lost);
  HolderSelector force;
  force.force = true;
  REQUIRE(f.backend->release(key, force));
  auto b = f.locker();
  auto taken = b->try_acquire(request(key, "b"), 2000ms);
  REQUIRE(taken);
  CHECK(taken->state == AcquireOutcome::State::acquired);
  auto renewed = a->renew(Millis(30000));
  REQUIRE_FALSE(renewed);
  CHECK(renewed.error().kind == ErrorKind::lost);
}

TEST_CASE("mysql: database sockets are close-on-exec") {
  if (!is_mysql()) return;
  Fixture f;
  auto a = f.locker();
  REQUIRE(a->try_acquire(request(test::unique_key("cloexec"), "a"), 0ms)->state == AcquireOutcome::State::acquired);
  int sockets = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(entry.path(), ec);
    if (ec || target.string().rfind("socket:", 0) != 0) continue;
    const int fd = std::stoi(entry.path().filename().string());
    ++sockets;
    CAPTURE(fd);
    CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
  }
  CHECK(sockets >= 2);
}

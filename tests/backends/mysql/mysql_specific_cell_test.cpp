// MySQL/MariaDB-specific checks (suites "mysql", "mysql.lease", "mysql.session"): what the
// statements cost, a lease's connection killed under it, release --force ending a session,
// close-on-exec sockets. What both servers promise is in the common suites.
#include <doctest/doctest.h>

#include <chrono>
#include <fcntl.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <map>
#include <thread>

#include "backends/mysql/mysql_connection.hpp"
#include "backends/registry.hpp"
#include "core/clock.hpp"
#include "conformance/conformance_helpers.hpp"
#include "support/test_env.hpp"

using namespace dblock;
using namespace std::chrono_literals;

namespace {

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
  auto rows = admin.run({"test.processes", "SELECT ID, HOST FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()"});
  REQUIRE(rows);
  for (std::size_t i = 0; i < rows->size(); ++i) {
    const std::string host = (*rows)[i].text(1);
    const auto colon = host.rfind(':');
    if (colon != std::string::npos && ports.count(host.substr(colon + 1))) ids.insert((*rows)[i].text(0));
  }
  return ids;
}

using conformance::request;  // the one LockRequest of the conformance tests

}  // namespace

// Statements each lease call sends, from the server's global counters (for the record; other
// sessions on a shared server would disturb the numbers, so this only reports them).
TEST_CASE("mysql: statements per lease acquire, renew and release" * doctest::test_suite("mysql.lease")) {
  Fixture f;
  auto counters = [&] {
    auto r = f.admin->run({"test.counters",
                           "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN "
                           "('QUESTIONS', 'COM_STMT_PREPARE', 'COM_STMT_EXECUTE')"});
    REQUIRE(r);
    std::map<std::string, long long> out;
    for (std::size_t i = 0; i < r->size(); ++i) out[(*r)[i].text(0)] = std::stoll((*r)[i].text(1));
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

TEST_CASE("mysql: a lease survives KILL CONNECTION of its connection: renew reconnects, token compared" *
          doctest::test_suite("mysql.lease")) {
  Fixture f;
  const std::string key = test::unique_key("lease-kill");
  const auto before = own_sessions(*f.admin);
  // The locker takes its Backend's connection over: a Backend opened now is the one to find.
  auto own = test::open(f.options);
  auto made = own->make_locker(test::strategy());
  REQUIRE(made);
  auto a = std::move(*made);
  auto got = a->try_acquire(request(key, "a"), 0ms);
  REQUIRE(got);
  REQUIRE(got->state == AcquireOutcome::State::acquired);
  std::vector<std::string> fresh;
  for (const auto& id : own_sessions(*f.admin))
    if (!before.count(id)) fresh.push_back(id);
  REQUIRE_MESSAGE(fresh.size() == 1, "cannot tell the lease locker's session (the test DSN must be TCP)");
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

TEST_CASE("mysql: release --force of a session holder ends its session" * doctest::test_suite("mysql.session")) {
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

TEST_CASE("mysql: database sockets are close-on-exec" * doctest::test_suite("mysql")) {
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

// A proxy that multiplexes (ProxySQL, MaxScale) would answer CONNECTION_ID() with a server
// session other than the handshake's; the test server is reached directly.
TEST_CASE("mysql: doctor's pooler line says direct, and passes whatever the strategy" * doctest::test_suite("mysql")) {
  Fixture f;
  auto checks = f.backend->doctor_checks(test::strategy());
  auto pooler = std::ranges::find(checks, std::string("pooler"), &DoctorCheck::name);
  REQUIRE(pooler != checks.end());
  CHECK(pooler->ok);
  CHECK(pooler->detail.starts_with("direct connection to the server"));
}

// SQLite's release signal (backends/sqlite/sqlite_wake.hpp, WakeWords): a release wakes one
// waiter of its key through <database>-wake, and nothing else wakes a waiter. Each party is a
// backend of its own, as each would be a process of its own.

#include <doctest/doctest.h>
#include <poll.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "backends/sqlite/sqlite_wake.hpp"
#include "backends/common/dsn.hpp"
#include "backends/registry.hpp"
#include "support/temp_dir.hpp"

using namespace dblock;
using namespace std::chrono_literals;

namespace {

struct Party {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Locker> locker;
};

Party party(const std::string& path) {
  auto dsn = parse_dsn("sqlite:" + path);
  REQUIRE(dsn.has_value());
  auto backend = open_backend(*dsn, BackendOptions{});
  REQUIRE(backend.has_value());
  REQUIRE((*backend)->ensure_schema().has_value());
  auto locker = (*backend)->make_locker(Strategy::lease);
  REQUIRE(locker.has_value());
  return Party{std::move(*backend), std::move(*locker)};
}

LockRequest request(const std::string& key, const std::string& owner) {
  LockRequest req;
  req.key = key;
  req.owner = owner;
  req.host = "localhost";
  req.pid = 1;
  req.ttl = 30s;
  return req;
}

AcquireOutcome::State attempt(Locker& l, const LockRequest& req, Millis wait) {
  auto out = l.try_acquire(req, wait);
  REQUIRE(out.has_value());
  return out->state;
}

void release(Locker& l) {
  ReleaseRequest r;
  REQUIRE(l.release(r).has_value());
}

// How many of `fds` turn readable within `within`.
int readable(const std::vector<int>& fds, std::chrono::milliseconds within) {
  std::vector<pollfd> p;
  for (int fd : fds) p.push_back({fd, POLLIN, 0});
  ::poll(p.data(), p.size(), static_cast<int>(within.count()));
  int n = 0;
  for (const auto& q : p) n += (q.revents & POLLIN) ? 1 : 0;
  return n;
}

using test::TempDir;

}  // namespace

TEST_CASE("sqlite: a release wakes one of its key's waiters, and other keys' commits wake none") {
  TempDir dir;
  const std::string db = dir.path + "/wake.db";
  const std::string key = "wanted";
  std::string other = "other";
  while (files::wake_word_of(other) == files::wake_word_of(key)) other += "+";

  Party holder = party(db), elsewhere = party(db);
  std::vector<Party> waiters;
  for (int i = 0; i < 3; ++i) waiters.push_back(party(db));
  REQUIRE(attempt(*holder.locker, request(key, "holder"), 0ms) == AcquireOutcome::State::acquired);
  std::vector<int> fds;
  for (std::size_t i = 0; i < waiters.size(); ++i) {
    // A waiting attempt (a wait given), as core's waiters make them: it starts to listen.
    REQUIRE(attempt(*waiters[i].locker, request(key, "waiter" + std::to_string(i)), 100ms) ==
            AcquireOutcome::State::busy);
    REQUIRE(waiters[i].locker->wakeup_fd() >= 0);
    fds.push_back(waiters[i].locker->wakeup_fd());
  }
  CHECK(std::filesystem::exists(db + "-wake"));

  // Another key taken and let go: two commits, and no waiter of this key hears of them.
  REQUIRE(attempt(*elsewhere.locker, request(other, "elsewhere"), 0ms) == AcquireOutcome::State::acquired);
  release(*elsewhere.locker);
  CHECK(readable(fds, 300ms) == 0);

  release(*holder.locker);
  REQUIRE(readable(fds, 5000ms) >= 1);  // generous: a loaded machine
  CHECK(readable(fds, 300ms) == 1);     // one woken, the others left asleep
  for (std::size_t i = 0; i < waiters.size(); ++i)
    if (readable({fds[i]}, 0ms) == 1) {
      waiters[i].locker->consume_wakeup();
      CHECK(attempt(*waiters[i].locker, request(key, "waiter" + std::to_string(i)), 0ms) ==
            AcquireOutcome::State::acquired);
    }
}

TEST_CASE("sqlite: `release --force` from another process wakes a waiter") {
  TempDir dir;
  const std::string db = dir.path + "/force.db";
  Party holder = party(db), waiter = party(db), admin = party(db);
  REQUIRE(attempt(*holder.locker, request("forced", "holder"), 0ms) == AcquireOutcome::State::acquired);
  REQUIRE(attempt(*waiter.locker, request("forced", "waiter"), 100ms) == AcquireOutcome::State::busy);
  const int fd = waiter.locker->wakeup_fd();
  REQUIRE(fd >= 0);
  HolderSelector all;
  all.force = true;
  REQUIRE(admin.backend->release("forced", all).has_value());
  CHECK(readable({fd}, 5000ms) == 1);
}

TEST_CASE("sqlite: a -wake of another size is left alone, and waiters poll") {
  TempDir dir;
  const std::string db = dir.path + "/sized.db";
  {
    std::ofstream out(db + "-wake");
    out << "not dblock's";
  }
  Party holder = party(db), waiter = party(db);
  REQUIRE(attempt(*holder.locker, request("k", "holder"), 0ms) == AcquireOutcome::State::acquired);
  CHECK(attempt(*waiter.locker, request("k", "waiter"), 100ms) == AcquireOutcome::State::busy);
  CHECK(waiter.locker->wakeup_fd() < 0);  // core's backoff
  release(*holder.locker);
  CHECK(attempt(*waiter.locker, request("k", "waiter"), 0ms) == AcquireOutcome::State::acquired);
  CHECK(std::filesystem::file_size(db + "-wake") == std::string("not dblock's").size());
}

TEST_CASE("sqlite: a symlink at the -wake is refused (78), and what it names is left alone") {
  TempDir dir;
  const std::string db = dir.path + "/linked.db", target = dir.path + "/target";
  {
    std::ofstream out(target);
    out << "not dblock's";
  }
  std::filesystem::create_symlink(target, db + "-wake");
  auto backend = open_backend(*parse_dsn("sqlite:" + db), BackendOptions{});
  REQUIRE_FALSE(backend.has_value());
  CHECK(backend.error().kind == ErrorKind::config);
  CHECK(backend.error().message.find(db + "-wake is a symbolic link") != std::string::npos);
  CHECK(std::filesystem::file_size(target) == std::string("not dblock's").size());
}

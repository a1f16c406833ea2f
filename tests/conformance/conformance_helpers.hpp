#pragma once
// Small helpers shared by the conformance tests. Everything goes through the Backend and
// Locker interface only, so the same tests run against every backend x strategy.
// Every case sits in a doctest TEST_SUITE that names the cells it applies to: "all", "lease",
// "session", "<backend>", "<backend>.lease", "<backend>.session"; ctest runs each cell as
// `dblock_conformance -ts=all,<kind>,<backend>,<backend>.<kind>` (tests/CMakeLists.txt).

#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/test_env.hpp"

namespace dblock::conformance {

using namespace std::chrono_literals;

inline bool is_lease() { return test::strategy() == Strategy::lease; }

/// A backend on tables no other test touches, schema created.
struct Db {
  explicit Db(int history_keep = 1000) : Db(test::dsn(), history_keep) {}
  Db(const std::string& dsn, int history_keep) {
    options.table_prefix = test::unique_prefix();
    options.history_keep = history_keep;
    backend = test::open(options, dsn);
    auto ok = backend->ensure_schema();
    REQUIRE_MESSAGE(ok.has_value(), (ok ? std::string() : ok.error().message));
  }

  /// The same tables through a connection of its own, as another process would have: lockers
  /// used on several threads at once each need one (a locker may share its Backend's connection).
  std::unique_ptr<Db> another() const { return std::unique_ptr<Db>(new Db(options)); }

  std::unique_ptr<Locker> locker() const {
    auto made = backend->make_locker(test::strategy());
    REQUIRE_MESSAGE(made.has_value(), (made ? std::string() : made.error().message));
    return std::move(*made);
  }

  LockStatus status(const std::string& key) const {
    std::vector<std::string> keys{key};
    auto rows = backend->status(keys);
    REQUIRE_MESSAGE(rows.has_value(), (rows ? std::string() : rows.error().message));
    REQUIRE(rows->size() == 1);
    return rows->front();
  }

  BackendOptions options;
  std::unique_ptr<Backend> backend;

 private:
  explicit Db(const BackendOptions& same) : options(same), backend(test::open(same, test::dsn())) {}
};

inline LockRequest request(const std::string& key, const std::string& owner, Millis ttl = 30s,
                           Millis min_interval = 0ms) {
  LockRequest req;
  req.key = key;
  req.owner = owner;
  req.host = "host-" + owner;
  req.pid = 4242;
  req.ttl = ttl;
  req.min_interval = min_interval;
  return req;
}

/// One attempt that must not fail with an error (busy and not_due are answers, not errors).
inline AcquireOutcome attempt(Locker& locker, const LockRequest& req) {
  auto out = locker.try_acquire(req, 0ms);
  REQUIRE_MESSAGE(out.has_value(), (out ? std::string() : out.error().message));
  return *out;
}

/// One attempt with a short wait, as core makes a waiter's: it may block up to that wait (a
/// wake queue's slice), and where the backend can it leaves the locker listening for the key's
/// release (wakeup_fd); an attempt without a wait does neither.
inline AcquireOutcome waiting_attempt(Locker& locker, const LockRequest& req) {
  auto out = locker.try_acquire(req, 100ms);
  REQUIRE_MESSAGE(out.has_value(), (out ? std::string() : out.error().message));
  return *out;
}

inline std::int64_t acquire(Locker& locker, const LockRequest& req) {
  AcquireOutcome out = attempt(locker, req);
  REQUIRE(out.state == AcquireOutcome::State::acquired);
  CHECK(out.token >= 1);
  return out.token;
}

inline void release(Locker& locker, const ReleaseRequest& req = {}) {
  auto ok = locker.release(req);
  REQUIRE_MESSAGE(ok.has_value(), (ok ? std::string() : ok.error().message));
}

/// What `read` returns once `done` holds of it, reading again every 20 ms for up to 10 s (then
/// its last answer, for the test's own check to fail on). For a read on another connection
/// right after a finished run's release: on MySQL/MariaDB that release's COMMIT goes with the
/// goodbye, not waited for (dblock(1), NOTES, Round trips), so another session may read the
/// moment before it; the CLI's next process connects first, a test's open connection need not.
template <class Read, class Done>
auto eventually(Read read, Done done) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  auto got = read();
  while (!done(got) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);
    got = read();
  }
  return got;
}

/// HolderSelectors for the stateless renew/release of another process.
inline HolderSelector by_owner(const std::string& owner) {
  HolderSelector who;
  who.owner = owner;
  return who;
}
inline HolderSelector by_token(std::int64_t token) {
  HolderSelector who;
  who.token = token;
  return who;
}
inline HolderSelector by_owner_and_token(const std::string& owner, std::int64_t token) {
  HolderSelector who = by_owner(owner);
  who.token = token;
  return who;
}
inline HolderSelector forced() {
  HolderSelector who;
  who.force = true;
  return who;
}

inline std::string error_text(const Error& e) { return e.message; }

}  // namespace dblock::conformance

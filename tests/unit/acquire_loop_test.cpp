#include <doctest/doctest.h>
#include <signal.h>
#include <fcntl.h>
#include <unistd.h>

#include <thread>

#include "core/acquire_loop.hpp"
#include "core/clock.hpp"
#include "core/log.hpp"
#include "support/fake_locker.hpp"

using namespace dblock;
using namespace std::chrono_literals;

namespace {

LockRequest request() {
  LockRequest r;
  r.key = "k";
  r.owner = "me";
  r.ttl = 30s;
  return r;
}

}  // namespace

TEST_CASE("acquire_with_wait: one attempt without -w") {
  auto script = std::make_shared<test::FakeScript>();
  script->busy_attempts = 100;
  auto locker = test::make_fake_locker(script);
  auto r = acquire_with_wait(*locker, request(), std::nullopt);
  REQUIRE(r);
  CHECK(r->outcome.state == AcquireOutcome::State::busy);
  CHECK(r->signal == 0);
  CHECK(script->attempts == 1);
  CHECK(script->attempt_waits.at(0) == 0ms);
}

TEST_CASE("acquire_with_wait: gives up at the deadline, with short server slices") {
  auto script = std::make_shared<test::FakeScript>();
  script->busy_attempts = 1000;
  auto locker = test::make_fake_locker(script);
  const Millis start = boottime_now();
  auto r = acquire_with_wait(*locker, request(), 700ms);
  const Millis took = boottime_now() - start;
  REQUIRE(r);
  CHECK(r->outcome.state == AcquireOutcome::State::busy);
  CHECK(took >= 650ms);
  // Generous for a loaded machine (it once failed there at the 2 s it had): it gives up, it
  // does not wait on. A starved process may also get in fewer attempts than a quiet one.
  CHECK(took < 5000ms);
  CHECK(script->attempts >= 2);
  CHECK(script->attempts < 40);  // backoff, not a busy loop
  for (Millis w : script->attempt_waits) CHECK(w <= 500ms);
}

TEST_CASE("acquire_with_wait: succeeds once the holder lets go") {
  auto script = std::make_shared<test::FakeScript>();
  script->busy_attempts = 3;
  auto locker = test::make_fake_locker(script);
  auto r = acquire_with_wait(*locker, request(), 10s);
  REQUIRE(r);
  CHECK(r->outcome.state == AcquireOutcome::State::acquired);
  CHECK(r->outcome.token == 42);
  CHECK(script->attempts == 4);
  CHECK(r->sent_at <= r->replied_at);
}

TEST_CASE("acquire_with_wait: a signal aborts a wait forever promptly") {
  auto script = std::make_shared<test::FakeScript>();
  script->busy_attempts = 1'000'000;
  script->raise_signal = SIGUSR1;
  script->raise_on_attempt = 3;
  auto locker = test::make_fake_locker(script);
  SignalWatch outer;  // keeps SIGUSR1 blocked until the test has checked the result
  const Millis start = boottime_now();
  auto r = acquire_with_wait(*locker, request(), Millis::max());
  REQUIRE(r);
  CHECK(r->signal == SIGUSR1);
  CHECK(r->outcome.state != AcquireOutcome::State::acquired);
  CHECK(script->attempts == 3);
  CHECK(boottime_now() - start < 2000ms);
}

TEST_CASE("acquire_with_wait: not due within the wait sleeps until due") {
  auto script = std::make_shared<test::FakeScript>();
  script->not_due_in = 300ms;
  auto locker = test::make_fake_locker(script);
  const Millis start = boottime_now();
  auto r = acquire_with_wait(*locker, request(), 3s);
  REQUIRE(r);
  CHECK(r->outcome.state == AcquireOutcome::State::acquired);
  CHECK(boottime_now() - start >= 280ms);
  CHECK(script->attempts <= 3);
}

TEST_CASE("acquire_with_wait: not due beyond the wait gives up at once") {
  auto script = std::make_shared<test::FakeScript>();
  script->not_due_in = 10s;
  auto locker = test::make_fake_locker(script);
  const Millis start = boottime_now();
  auto r = acquire_with_wait(*locker, request(), 1s);
  REQUIRE(r);
  CHECK(r->outcome.state == AcquireOutcome::State::not_due);
  CHECK(boottime_now() - start < 500ms);
  CHECK(script->attempts == 1);
}

TEST_CASE("acquire_with_wait: a backend wake-up retries at once") {
  int pipefd[2];
  REQUIRE(::pipe2(pipefd, O_NONBLOCK) == 0);
  REQUIRE(::write(pipefd[1], "x", 1) == 1);
  auto script = std::make_shared<test::FakeScript>();
  script->busy_attempts = 1;
  script->wakeup_fd = pipefd[0];
  auto locker = test::make_fake_locker(script);
  auto r = acquire_with_wait(*locker, request(), 5s);
  REQUIRE(r);
  CHECK(r->outcome.state == AcquireOutcome::State::acquired);
  CHECK(script->wakeups_consumed == 1);
  ::close(pipefd[0]);
  ::close(pipefd[1]);
}

TEST_CASE("acquire_with_wait: errors other than busy and connection end the wait") {
  auto script = std::make_shared<test::FakeScript>();
  script->acquire_error = Error{ErrorKind::other, "refused"};
  auto locker = test::make_fake_locker(script);
  const Millis start = boottime_now();
  auto r = acquire_with_wait(*locker, request(), 5s);
  REQUIRE_FALSE(r);
  CHECK(r.error().kind == ErrorKind::other);
  CHECK(script->attempts == 1);
  CHECK(boottime_now() - start < 500ms);

  script->acquire_error = Error{ErrorKind::busy, "lock wait timeout"};
  auto busy = acquire_with_wait(*locker, request(), std::nullopt);
  REQUIRE(busy);
  CHECK(busy->outcome.state == AcquireOutcome::State::busy);
}

TEST_CASE("acquire_with_wait: -v tells the server's words behind a busy answer, once") {
  // A take refused with a busy error (a deadlock, a certification conflict, a lock wait's end)
  // counts as held; -v says what the server said, so an operator sees why.
  auto script = std::make_shared<test::FakeScript>();
  script->acquire_error = Error{ErrorKind::busy, "Deadlock found when trying to get lock (1213)"};
  auto locker = test::make_fake_locker(script);
  char path[] = "/tmp/dblock-acquire-loop-XXXXXX";
  const int out = mkstemp(path);
  REQUIRE(out >= 0);
  unlink(path);
  const int saved = dup(STDERR_FILENO);
  REQUIRE(saved >= 0);
  log::set_level(log::Level::verbose);
  dup2(out, STDERR_FILENO);
  auto r = acquire_with_wait(*locker, request(), 300ms);
  dup2(saved, STDERR_FILENO);
  close(saved);
  log::set_level(log::Level::normal);
  REQUIRE(r);
  CHECK(r->outcome.state == AcquireOutcome::State::busy);
  CHECK(script->attempts > 1);
  std::string text(4096, '\0');
  const ssize_t n = pread(out, text.data(), text.size(), 0);
  close(out);
  REQUIRE(n > 0);
  text.resize(static_cast<std::size_t>(n));
  const std::string said = "the database refused the take: Deadlock found when trying to get lock (1213)";
  const auto first = text.find(said);
  CHECK(first != std::string::npos);
  CHECK(text.find(said, first + 1) == std::string::npos);
}

TEST_CASE("acquire_with_wait: connection errors within the wait are retried on the same locker") {
  auto script = std::make_shared<test::FakeScript>();
  script->connection_errors = 4;
  auto locker = test::make_fake_locker(script);
  auto r = acquire_with_wait(*locker, request(), 20s);
  REQUIRE(r);
  CHECK(r->outcome.state == AcquireOutcome::State::acquired);
  CHECK(script->attempts == 5);
  // Backoff between the retries, not a busy loop: 50 ms at least before the second try.
  CHECK(script->attempt_times.at(1) - script->attempt_times.at(0) >= 50ms);
}

TEST_CASE("acquire_with_wait: without a wait a connection error answers at once") {
  auto script = std::make_shared<test::FakeScript>();
  script->connection_errors = 1;
  auto locker = test::make_fake_locker(script);
  auto r = acquire_with_wait(*locker, request(), std::nullopt);
  REQUIRE_FALSE(r);
  CHECK(r.error().kind == ErrorKind::connection);
  CHECK(r.error().message == "fake: connection refused (attempt 1)");
  CHECK(script->attempts == 1);
}

namespace {

// An OpenLocker over the fake: the first `open_failures` opens fail as a server that is
// down would (kind `open_error`), later ones hand out a fake locker; counts every call.
struct FakeOpener {
  std::shared_ptr<test::FakeScript> script = std::make_shared<test::FakeScript>();
  int open_failures = 0;
  ErrorKind open_error = ErrorKind::connection;
  bool overloaded = false;  // the failures are a server's "too many connections"
  int opens = 0;

  OpenLocker opener() {
    return [this]() -> Result<std::unique_ptr<Locker>> {
      ++opens;
      if (opens <= open_failures) {
        Error e{open_error, "fake: cannot connect (open " + std::to_string(opens) + ")"};
        e.overloaded = overloaded;
        return std::unexpected(e);
      }
      return test::make_fake_locker(script);
    };
  }
};

}  // namespace

TEST_CASE("acquire_with_wait: a first connect that fails is retried until the database answers") {
  FakeOpener f;
  f.open_failures = 3;
  SignalWatch signals;
  auto r = acquire_with_wait(f.opener(), request(), 20s, signals);
  REQUIRE(r);
  CHECK(r->result.outcome.state == AcquireOutcome::State::acquired);
  REQUIRE(r->locker);
  CHECK(f.opens == 4);
  CHECK(f.script->attempts == 1);
}

TEST_CASE("acquire_with_wait: after a connection error in an attempt the locker is opened afresh") {
  FakeOpener f;
  f.script->connection_errors = 2;
  f.script->busy_attempts = 3;
  SignalWatch signals;
  auto r = acquire_with_wait(f.opener(), request(), 20s, signals);
  REQUIRE(r);
  CHECK(r->result.outcome.state == AcquireOutcome::State::acquired);
  CHECK(f.script->attempts == 4);
  // One open before the first attempt, one after each of the two connection errors; busy
  // answers keep the locker.
  CHECK(f.opens == 3);
}

TEST_CASE("acquire_with_wait: connection errors until the deadline end the wait with the last error") {
  FakeOpener f;
  f.open_failures = 1'000'000;
  SignalWatch signals;
  const Millis start = boottime_now();
  auto r = acquire_with_wait(f.opener(), request(), 1500ms, signals);
  const Millis took = boottime_now() - start;
  REQUIRE_FALSE(r);
  CHECK(r.error().kind == ErrorKind::connection);
  CHECK(took >= 1400ms);
  CHECK(took < 3000ms);
  CHECK(f.opens >= 3);
  CHECK(f.opens < 30);  // backoff, not a busy loop
  CAPTURE(r.error().message);
  CHECK(r.error().message.find("within the wait of 1.5s") != std::string::npos);
  CHECK(r.error().message.find("fake: cannot connect (open " + std::to_string(f.opens) + ")") != std::string::npos);
}

TEST_CASE("acquire_with_wait: a configuration error is never retried") {
  FakeOpener f;
  f.open_failures = 1'000'000;
  f.open_error = ErrorKind::config;
  SignalWatch signals;
  const Millis start = boottime_now();
  auto r = acquire_with_wait(f.opener(), request(), 10s, signals);
  REQUIRE_FALSE(r);
  CHECK(r.error().kind == ErrorKind::config);
  CHECK(r.error().message == "fake: cannot connect (open 1)");
  CHECK(f.opens == 1);
  CHECK(boottime_now() - start < 500ms);
}

TEST_CASE("acquire_with_wait: nonblocking, a connection error on the first connect answers at once") {
  FakeOpener f;
  f.open_failures = 1'000'000;
  SignalWatch signals;
  auto r = acquire_with_wait(f.opener(), request(), std::nullopt, signals);
  REQUIRE_FALSE(r);
  CHECK(r.error().kind == ErrorKind::connection);
  CHECK(r.error().message == "fake: cannot connect (open 1)");
  CHECK(f.opens == 1);
}

TEST_CASE("acquire_with_wait: a signal ends a wait for an unreachable database") {
  FakeOpener f;
  f.open_failures = 1'000'000;
  SignalWatch signals;
  ::raise(SIGUSR2);  // blocked by the watch: seen by the loop, not delivered
  const Millis start = boottime_now();
  auto r = acquire_with_wait(f.opener(), request(), Millis::max(), signals);
  REQUIRE(r);
  CHECK(r->result.signal == SIGUSR2);
  CHECK(boottime_now() - start < 2000ms);
}

TEST_CASE("describe_holder names owner, host, pid, token and times") {
  LockStatus h;
  h.owner = "web1:42:abc";
  h.host = "web1";
  h.pid = 42;
  h.token = 7;
  h.acquired_at_ms = 0;
  h.expires_at_ms = 30'000;
  h.db_now_ms = 10'000;
  std::string s = describe_holder(h);
  CHECK(s.find("web1:42:abc") != std::string::npos);
  CHECK(s.find("pid 42") != std::string::npos);
  CHECK(s.find("token 7") != std::string::npos);
  CHECK(s.find("1970-01-01T00:00:00.000Z") != std::string::npos);
  CHECK(s.find("in 20s") != std::string::npos);
}

TEST_CASE("acquire_with_wait: without a wait, an overloaded server is retried within --overload-retry") {
  FakeOpener f;
  f.open_failures = 3;
  f.overloaded = true;
  f.script->busy_attempts = 100;
  SignalWatch signals;
  auto r = acquire_with_wait(f.opener(), request(), std::nullopt, signals, 5s);
  REQUIRE(r);
  // The server answered at the fourth open: the lock is held, so no wait and no more tries.
  CHECK(r->result.outcome.state == AcquireOutcome::State::busy);
  CHECK(f.opens == 4);
  CHECK(f.script->attempts == 1);
}

TEST_CASE("acquire_with_wait: an overload that outlasts --overload-retry is a skip, naming the last error") {
  FakeOpener f;
  f.open_failures = 1'000'000;
  f.overloaded = true;
  SignalWatch signals;
  const Millis start = boottime_now();
  auto r = acquire_with_wait(f.opener(), request(), std::nullopt, signals, 800ms);
  const Millis took = boottime_now() - start;
  REQUIRE(r);
  CHECK(r->result.outcome.state == AcquireOutcome::State::busy);
  CHECK_FALSE(r->locker);
  CHECK(took >= 750ms);
  CHECK(took < 2500ms);
  CHECK(f.opens >= 3);
  CHECK(f.opens < 40);  // backoff, not a busy loop
  const std::string& why = r->result.turned_away;
  CAPTURE(why);
  CHECK(why.find("--overload-retry") != std::string::npos);
  CHECK(why.find("fake: cannot connect (open " + std::to_string(f.opens) + ")") != std::string::npos);
}

TEST_CASE("acquire_with_wait: after an overload, a connect that times out is the same storm, and it ends as a skip") {
  // The storm's second try finds the server's listen queue full: no answer within the connect
  // timeout, an error that alone would mean a server that is down.
  int opens = 0;
  const OpenLocker open = [&]() -> Result<std::unique_ptr<Locker>> {
    Error e{ErrorKind::connection, "fake: " + std::string(++opens == 1 ? "too many connections" : "no answer")};
    e.overloaded = opens == 1;
    return std::unexpected(e);
  };
  SignalWatch signals;
  auto r = acquire_with_wait(open, request(), std::nullopt, signals, 600ms);
  REQUIRE(r);
  CHECK(r->result.outcome.state == AcquireOutcome::State::busy);
  CHECK(opens >= 3);
  CHECK(r->result.turned_away.find("fake: no answer") != std::string::npos);
}

TEST_CASE("acquire_with_wait: one overloaded attempt that outlasts --overload-retry is a skip too") {
  // The storm's slow connect: the server accepted it, then answered nothing until the connect
  // timeout, which is longer than the retry.
  int opens = 0;
  const OpenLocker open = [&]() -> Result<std::unique_ptr<Locker>> {
    ++opens;
    std::this_thread::sleep_for(300ms);
    Error e{ErrorKind::connection, "fake: no answer within the connect timeout"};
    e.overloaded = true;
    return std::unexpected(e);
  };
  SignalWatch signals;
  auto r = acquire_with_wait(open, request(), std::nullopt, signals, 200ms);
  REQUIRE(r);
  CHECK(r->result.outcome.state == AcquireOutcome::State::busy);
  CHECK(opens == 1);
  CHECK(r->result.turned_away.find("fake: no answer within the connect timeout") != std::string::npos);
}

TEST_CASE("acquire_with_wait: --overload-retry 0, or an error that is no overload, answers at once") {
  FakeOpener off;
  off.open_failures = 1'000'000;
  off.overloaded = true;
  SignalWatch signals;
  auto r = acquire_with_wait(off.opener(), request(), std::nullopt, signals, 0ms);
  REQUIRE_FALSE(r);
  CHECK(off.opens == 1);

  FakeOpener down;  // refused: the server is not there at all
  down.open_failures = 1'000'000;
  auto d = acquire_with_wait(down.opener(), request(), std::nullopt, signals, 5s);
  REQUIRE_FALSE(d);
  CHECK(d.error().message == "fake: cannot connect (open 1)");
  CHECK(down.opens == 1);
}

TEST_CASE("acquire_with_wait: a short -w still gets the whole --overload-retry") {
  FakeOpener f;
  f.open_failures = 1'000'000;
  f.overloaded = true;
  SignalWatch signals;
  const Millis start = boottime_now();
  auto r = acquire_with_wait(f.opener(), request(), 200ms, signals, 900ms);
  REQUIRE_FALSE(r);
  CHECK(boottime_now() - start >= 850ms);
}

TEST_CASE("overload_retry_for: never past a third of the TTL") {
  CHECK(overload_retry_for(5s, 30s) == 5s);
  CHECK(overload_retry_for(5s, 6s) == 2s);
  CHECK(overload_retry_for(0ms, 30s) == 0ms);
  CHECK(overload_retry_for(-1s, 30s) == 0ms);
}

TEST_CASE("format_utc_ms: ISO 8601 in UTC, to the millisecond") {
  CHECK(format_utc_ms(0) == "1970-01-01T00:00:00.000Z");
  CHECK(format_utc_ms(1795953101609) == "2026-11-29T11:51:41.609Z");
  CHECK(format_utc_ms(1709251199999) == "2024-02-29T23:59:59.999Z");
  CHECK(format_utc_ms(951782400000) == "2000-02-29T00:00:00.000Z");
}

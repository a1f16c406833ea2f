#include <doctest/doctest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/clock.hpp"
#include "core/event_log.hpp"
#include "core/heartbeat.hpp"
#include "core/run_job.hpp"
#include "core/signals.hpp"
#include "support/fake_locker.hpp"

using namespace dblock;
using namespace std::chrono_literals;

namespace {

struct Fixture {
  std::shared_ptr<test::FakeScript> script = std::make_shared<test::FakeScript>();
  RunOptions options;
  std::filesystem::path dir;

  Fixture() {
    options.request.key = "job";
    options.request.owner = "host:1:abc";
    options.request.host = "host";
    options.request.pid = 1;
    options.request.ttl = 30s;
    char tmpl[] = "/tmp/dblock-run-test-XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  ~Fixture() { std::filesystem::remove_all(dir); }

  void shell(const std::string& text) { options.command = {"/bin/sh", "-c", text}; }
  // run_job under an outer watch: a signal the test provokes stays blocked until checked.
  int run() {
    SignalWatch outer;
    return run_job(test::fake_opener(script), options);
  }
  const ReleaseRequest& only_release() {
    REQUIRE(script->releases.size() == 1);
    return script->releases.front();
  }
  RunOutcome outcome() {
    const auto& r = only_release();
    REQUIRE(r.history);
    return r.history->outcome;
  }
  std::string read(const std::string& name) {
    std::ifstream in(dir / name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

}  // namespace

TEST_CASE("run: exit status 0 is ok and released with the history row") {
  Fixture f;
  f.shell("exit 0");
  CHECK(f.run() == 0);
  const auto& r = f.only_release();
  CHECK(r.finished_run);
  CHECK(r.exit_code == 0);
  REQUIRE(r.history);
  CHECK(r.history->outcome == RunOutcome::ok);
  CHECK(r.history->exit_code == 0);
  CHECK(r.history->token == 42);
  CHECK(r.history->key == "job");
  CHECK(r.history->owner == "host:1:abc");
  CHECK(r.history->strategy == "lease");
}

TEST_CASE("run: the heartbeat renews while the command runs") {
  Fixture f;
  f.options.request.ttl = 3s;  // a renew every second
  f.options.kill_after = 0ms;
  f.shell("sleep 1.5");
  CHECK(f.run() == 0);
  CHECK(f.script->renews >= 1);
  CHECK(f.only_release().finished_run);
}

TEST_CASE("run: the release is made ready once while the command runs, before it runs") {
  Fixture f;
  f.shell("exit 0");  // even a command that ends at once
  CHECK(f.run() == 0);
  CHECK(f.script->releases_prepared == 1);
  CHECK(f.script->prepared_before_release == std::vector<int>{1});
}

TEST_CASE("run: the guard waits out the release, so its exit is not on the handoff's path") {
  Fixture f;
  f.shell("exit 0");
  CHECK(f.run() == 0);
  // Its report of the command's end woke dblock onto its CPU; exiting there at once ran first.
  // Alive at the release (waiting, or on its way to wait), never exited before it.
  CHECK(f.script->live_children_at_release == std::vector<int>{1});
}

TEST_CASE("run: the command's exit status passes through as failed") {
  Fixture f;
  f.shell("exit 3");
  CHECK(f.run() == 3);
  CHECK(f.outcome() == RunOutcome::failed);
  CHECK(f.only_release().exit_code == 3);
}

TEST_CASE("run: death by signal N is 128+N, outcome signal") {
  Fixture f;
  f.shell("kill -USR2 $$");
  CHECK(f.run() == 128 + SIGUSR2);
  CHECK(f.outcome() == RunOutcome::signal);
}

TEST_CASE("run: --no-history releases without a history row") {
  Fixture f;
  f.options.record_history = false;
  f.shell("exit 0");
  CHECK(f.run() == 0);
  CHECK_FALSE(f.only_release().history);
  CHECK(f.only_release().finished_run);
}

TEST_CASE("run: a command not found is 127, not executable 126, and still released") {
  Fixture f;
  f.options.command = {"dblock-no-such-command-xyz"};
  CHECK(f.run() == 127);
  CHECK(f.outcome() == RunOutcome::failed);
  CHECK(f.only_release().exit_code == 127);

  Fixture g;
  auto file = g.dir / "not-executable";
  std::ofstream(file) << "#!/bin/sh\nexit 0\n";
  ::chmod(file.c_str(), 0644);
  g.options.command = {file.string()};
  CHECK(g.run() == 126);
  CHECK(g.outcome() == RunOutcome::failed);
}

TEST_CASE("run: DBLOCK_* variables reach the command, the DSN does not") {
  Fixture f;
  ::setenv("DBLOCK_DSN", "postgres://u:secret@127.0.0.1/db", 1);
  ::setenv("DBLOCK_DSN_FILE", "/etc/secret", 1);
  ::unsetenv("DBLOCK_STRATEGY");
  f.options.strategy = Strategy::advisory;
  f.shell("env > '" + (f.dir / "env").string() + "'");
  CHECK(f.run() == 0);
  ::unsetenv("DBLOCK_DSN");
  ::unsetenv("DBLOCK_DSN_FILE");
  std::string env = f.read("env");
  CHECK(env.find("DBLOCK_KEY=job\n") != std::string::npos);
  CHECK(env.find("DBLOCK_TOKEN=42\n") != std::string::npos);
  CHECK(env.find("DBLOCK_OWNER=host:1:abc\n") != std::string::npos);
  CHECK(env.find("DBLOCK_RUN_STRATEGY=advisory\n") != std::string::npos);
  // The run's strategy is not handed on as a setting: an inner dblock would take it as its own.
  CHECK(env.find("DBLOCK_STRATEGY=") == std::string::npos);
  CHECK(env.find("DBLOCK_DSN") == std::string::npos);
  CHECK(env.find("secret") == std::string::npos);
}

TEST_CASE("run: the command runs in its own process group") {
  Fixture f;
  f.shell("ps -o pgid= -p $$ | tr -d ' ' > '" + (f.dir / "pgid").string() + "'; echo $$ > '" +
          (f.dir / "pid").string() + "'");
  CHECK(f.run() == 0);
  CHECK(f.read("pgid") == f.read("pid"));
  CHECK(f.read("pid") != std::to_string(::getpgrp()) + "\n");
}

TEST_CASE("run: conflict returns -E and runs nothing, releases nothing") {
  Fixture f;
  f.script->busy_attempts = 1000;
  f.shell("touch '" + (f.dir / "ran").string() + "'");
  CHECK(f.run() == 75);
  f.options.conflict_exit_code = 123;
  CHECK(f.run() == 123);
  f.options.conflict_exit_code = 0;
  CHECK(f.run() == 0);
  CHECK_FALSE(std::filesystem::exists(f.dir / "ran"));
  CHECK(f.script->releases.empty());

  Fixture g;
  g.script->not_due_in = 1h;
  g.shell("touch '" + (g.dir / "ran").string() + "'");
  CHECK(g.run() == 75);
  CHECK_FALSE(std::filesystem::exists(g.dir / "ran"));
}

TEST_CASE("run: a skip lets its locker go before it is described and reported") {
  // A session strategy's locker owns its connection: in a start storm against max_connections
  // that connection's slot is the next contender's. The skip's event goes to a socket of this
  // test (--log syslog), and is not there yet when the locker goes.
  Fixture f;
  f.script->busy_attempts = 1000;
  const std::string path = (f.dir / "log").string();
  const int sock = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  REQUIRE(sock >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  REQUIRE(path.size() < sizeof addr.sun_path);
  path.copy(addr.sun_path, path.size());
  REQUIRE(::bind(sock, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
  ::setenv("DBLOCK_SYSLOG_SOCKET", path.c_str(), 1);
  event_log::configure(event_log::Sink::syslog, false);
  std::vector<bool> reported_at_gone;
  f.script->on_locker_gone = [&] {
    char c;
    reported_at_gone.push_back(::recv(sock, &c, 1, MSG_PEEK | MSG_DONTWAIT) >= 0);
  };
  f.shell("exit 0");
  const int status = f.run();
  event_log::configure(event_log::Sink::stderr_only, false);
  ::unsetenv("DBLOCK_SYSLOG_SOCKET");
  char line[1024];
  const ssize_t got = ::recv(sock, line, sizeof line, MSG_DONTWAIT);
  ::close(sock);
  CHECK(status == 75);
  CHECK(reported_at_gone == std::vector<bool>{false});
  REQUIRE(got > 0);
  CHECK(std::string(line, static_cast<std::size_t>(got)).find("skipped 'job'") != std::string::npos);
}

TEST_CASE("run: a signal while waiting aborts with 128+N and runs nothing") {
  Fixture f;
  f.script->busy_attempts = 1'000'000;
  f.script->raise_signal = SIGTERM;
  f.script->raise_on_attempt = 2;
  f.options.wait = Millis::max();
  f.shell("touch '" + (f.dir / "ran").string() + "'");
  CHECK(f.run() == 128 + SIGTERM);
  CHECK_FALSE(std::filesystem::exists(f.dir / "ran"));
  CHECK(f.script->releases.empty());
}

TEST_CASE("run: a signal to dblock reaches the command, which is released as killed") {
  Fixture f;
  // The command signals dblock (here the test process; its parent is the job guard) and sleeps.
  f.shell("kill -TERM " + std::to_string(::getpid()) + "; sleep 30");
  const Millis start = boottime_now();
  CHECK(f.run() == 128 + SIGTERM);
  CHECK(boottime_now() - start < 10s);
  CHECK(f.outcome() == RunOutcome::killed);
}

TEST_CASE("run: a lost lock terminates the command and exits 76") {
  Fixture f;
  f.options.request.ttl = 3s;
  f.options.kill_after = 0ms;
  f.script->renew_fail_after = 0ms;
  f.script->renew_error = ErrorKind::lost;
  f.shell("sleep 30");
  const Millis start = boottime_now();
  CHECK(f.run() == 76);
  const Millis took = boottime_now() - start;
  CHECK(took >= 900ms);  // the first renew is at ttl/3
  CHECK(took < 3s);
  CHECK(f.outcome() == RunOutcome::lost);
  CHECK(f.only_release().exit_code == 128 + SIGTERM);
}

TEST_CASE("run: renew failing until the deadline kills the command before the lease ends") {
  Fixture f;
  f.options.request.ttl = 3s;
  f.options.kill_after = 0ms;
  f.script->renew_fail_after = 0ms;
  f.script->renew_error = ErrorKind::connection;
  // Ignores SIGTERM: only the SIGKILL that must land before the deadline stops it.
  f.shell("trap '' TERM; sleep 30");
  const Millis start = boottime_now();
  CHECK(f.run() == 76);
  const Millis took = boottime_now() - start;
  CHECK(took >= 1500ms);
  CHECK(took < 3s);  // dead before the lease (ttl 3s from the acquire) could expire
  CHECK(f.script->failed_renews >= 2);  // retried before giving up
  CHECK(f.outcome() == RunOutcome::lost);
}

TEST_CASE("run: a renew that fails for a while and then recovers keeps the command running") {
  Fixture f;
  f.options.request.ttl = 3s;
  f.options.kill_after = 0ms;
  // The heartbeat renews every ttl/3 = 1 s: the renew at ~1 s and its retries fail, the
  // window closes at 1.5 s, later renews succeed, all well before the 3 s lease would end.
  f.script->renew_fail_after = 0ms;
  f.script->renew_fail_until = 1500ms;
  f.shell("sleep 2.8");
  CHECK(f.run() == 0);
  CHECK(f.script->failed_renews >= 1);
  // Every failure came first (the window starts at the acquire), so a success after the
  // failures is a renew beyond the failed ones.
  CHECK(f.script->renews > f.script->failed_renews);
  CHECK(f.outcome() == RunOutcome::ok);
}

TEST_CASE("run: a renew stuck in the database does not delay the kill") {
  Fixture f;
  f.options.request.ttl = 3s;
  f.options.kill_after = 0ms;
  f.script->renew_delay = 2500ms;  // the renew sent at 1s returns at 3.5s, after the lease
  f.shell("sleep 30");
  const Millis start = boottime_now();
  CHECK(f.run() == 76);
  CHECK(boottime_now() - start < 5s);  // the kill came at ~2s; the release waited for the renew
  CHECK(f.outcome() == RunOutcome::lost);
}

TEST_CASE("run: --on-lost ignore lets the command finish with its status") {
  Fixture f;
  f.options.request.ttl = 3s;
  f.options.kill_after = 0ms;
  f.options.terminate_on_lost = false;
  f.script->renew_fail_after = 0ms;
  f.script->renew_error = ErrorKind::lost;
  f.shell("sleep 1.6; exit 5");
  CHECK(f.run() == 5);
  CHECK(f.outcome() == RunOutcome::lost);
}

TEST_CASE("run: --max-hold terminates with 124, SIGKILL after --kill-after") {
  Fixture f;
  f.options.max_hold = 300ms;
  f.shell("sleep 30");
  const Millis start = boottime_now();
  CHECK(f.run() == 124);
  CHECK(boottime_now() - start < 3s);
  CHECK(f.outcome() == RunOutcome::max_hold);

  Fixture g;
  g.options.max_hold = 200ms;
  g.options.kill_after = 400ms;
  g.shell("trap '' TERM; sleep 30");
  const Millis t0 = boottime_now();
  CHECK(g.run() == 124);
  const Millis took = boottime_now() - t0;
  CHECK(took >= 550ms);
  CHECK(took < 5s);
  CHECK(g.outcome() == RunOutcome::max_hold);
}

TEST_CASE("run: --min-hold goes to the database for every strategy; dblock does not wait it out") {
  for (Strategy strategy : {Strategy::lease, Strategy::for_update}) {
    Fixture f;
    f.options.strategy = strategy;
    f.options.min_hold = 1h;
    f.shell("exit 0");
    const Millis start = boottime_now();
    CHECK(f.run() == 0);
    CHECK(boottime_now() - start < 2s);
    CHECK(f.only_release().min_hold == 1h);
  }
}

TEST_CASE("run: a failed release is reported but the command's status stands") {
  Fixture f;
  f.script->release_error = Error{ErrorKind::connection, "down"};
  f.shell("exit 4");
  CHECK(f.run() == 4);
  CHECK(f.script->releases.size() == 1);
}

TEST_CASE("run: backend errors map to exit codes") {
  Fixture f;
  f.script->open_error = Error{ErrorKind::config, "advisory needs mysql or postgres"};
  f.shell("exit 0");
  CHECK(f.run() == 78);

  Fixture g;
  g.script->acquire_error = Error{ErrorKind::connection, "server down"};
  g.shell("exit 0");
  CHECK(g.run() == 69);
  CHECK(g.script->releases.empty());
}

TEST_CASE("validate_run_timing: the schedule needs a retry and the grace before the deadline") {
  CHECK(validate_run_timing(30s, 5s));
  CHECK(validate_run_timing(18s, 5s));
  CHECK(validate_run_timing(6s, 1s));
  CHECK(validate_run_timing(3s, 0s));
  auto bad = validate_run_timing(3s, 5s);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().kind == ErrorKind::usage);
  CHECK(bad.error().message.find("--ttl 18s or more") != std::string::npos);
  CHECK(bad.error().message.find("--kill-after 0s or less") != std::string::npos);
  auto close = validate_run_timing(10s, 5s);
  REQUIRE_FALSE(close);
  CHECK(close.error().message.find("--kill-after 2s or less") != std::string::npos);
  CHECK_FALSE(validate_run_timing(5900ms, 1s));
}

TEST_CASE("default_kill_after: 5s, shrunk to fit the TTL, so --ttl alone always works") {
  CHECK(default_kill_after(30s) == 5s);
  CHECK(default_kill_after(18s) == 5s);
  CHECK(default_kill_after(10s) == 2s);  // 10s/3 - 1s = 2.33s, whole seconds
  CHECK(default_kill_after(3s) == 0s);
  CHECK(default_kill_after(2s) == 0s);  // never negative; validate_ttl refuses 2s
  for (Millis ttl : {3000ms, 4500ms, 10000ms, 17999ms, 60000ms}) {
    CAPTURE(ttl.count());
    CHECK(validate_run_timing(ttl, default_kill_after(ttl)));
  }
}

TEST_CASE("validate_ttl: below 3s a renew interval cannot cover the margin; the message names 3s") {
  CHECK(validate_ttl(3s));
  CHECK(validate_ttl(30s));
  auto bad = validate_ttl(2s);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().kind == ErrorKind::usage);
  CHECK(bad.error().message.find("use --ttl 3s or more") != std::string::npos);
}

TEST_CASE("run: invalid timing is a usage error before anything is locked") {
  Fixture f;
  f.options.request.ttl = 3s;
  f.shell("exit 0");
  CHECK(f.run() == 64);
  CHECK(f.script->attempts == 0);
}

TEST_CASE("run_job: a connection error before the lock is retried within -w, then the command runs") {
  Fixture f;
  f.script->connection_errors = 3;
  f.options.wait = 20s;
  f.shell("exit 0");
  CHECK(f.run() == 0);
  CHECK(f.script->attempts == 4);
  CHECK(f.outcome() == RunOutcome::ok);
}

TEST_CASE("run_job: connection errors until the end of -w exit 69 without running the command") {
  Fixture f;
  f.script->connection_errors = 1'000'000;
  f.options.wait = 1s;
  f.shell("touch " + (f.dir / "ran").string());
  const Millis start = boottime_now();
  CHECK(f.run() == 69);
  CHECK(boottime_now() - start >= 900ms);
  CHECK_FALSE(std::filesystem::exists(f.dir / "ran"));
  CHECK(f.script->releases.empty());
}

TEST_CASE("run_job: without -w a connection error exits 69 at once") {
  Fixture f;
  f.script->connection_errors = 1'000'000;
  f.shell("exit 0");
  CHECK(f.run() == 69);
  CHECK(f.script->attempts == 1);
}

#include <doctest/doctest.h>

#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "backends/sqlite/sqlite_file.hpp"

using namespace dblock;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("database file: a user outside a group made for sharing is told to join it") {
  const std::string fix = files::group_fix("bob", "dblock", false, "rw", "/srv/j.db /srv/j.db-wal");
  CHECK(fix ==
        "fix, as root: add bob to group dblock (usermod -aG dblock bob), or give /srv/j.db /srv/j.db-wal a group bob "
        "is in and chmod g+rw (dblock(1), SHARING A DATABASE FILE)");
}

TEST_CASE("database file: never told to join root's group or the owner's own, but to make a group") {
  for (const char* group : {"root", "alice"}) {
    const std::string fix = files::group_fix("farm1", group, true, "rw", "/srv/j.db");
    CHECK_FALSE(contains(fix, "usermod -aG " + std::string(group)));
    CHECK_FALSE(contains(fix, "to group " + std::string(group)));
    CHECK(contains(fix, "a group of their own"));
    CHECK(contains(fix, "groupadd dblock; chgrp dblock /srv/j.db; chmod g+rw /srv/j.db; usermod -aG dblock farm1"));
  }
}

// The message a user gets for a root:root 0644 database (as the farm1 got it). Needs
// root to make such a file and to become another user; otherwise only the cases above run.
TEST_CASE("database file: a root-owned database refused to another user suggests no root group") {
  if (::geteuid() != 0) {
    MESSAGE("not root: the advice is covered by group_fix's cases only");
    return;
  }
  char tmpl[] = "/tmp/dblock-dbfile-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  REQUIRE(::chmod(dir.c_str(), 0755) == 0);
  const std::string db = dir + "/jobs.db";
  const int fd = ::open(db.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  REQUIRE(fd >= 0);
  ::close(fd);
  REQUIRE(::chmod(db.c_str(), 0644) == 0);

  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(pipe_fds[0]);
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0)
      ::_exit(2);
    auto ok = files::check_writable({db, "SQLite database", {"-wal", "-shm"}}, false);
    const std::string message = ok ? std::string("allowed") : ok.error().message;
    [[maybe_unused]] auto written = ::write(pipe_fds[1], message.data(), message.size());
    ::_exit(ok ? 1 : 0);
  }
  ::close(pipe_fds[1]);
  std::string message;
  char buf[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) message.append(buf, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  std::filesystem::remove_all(dir);
  INFO(message);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(contains(message, "owner root, group root"));
  CHECK_FALSE(contains(message, "usermod -aG root"));
  CHECK(contains(message, "a group of their own"));
}

namespace {

struct Dir {
  std::string path;
  Dir() {
    char tmpl[] = "/tmp/dblock-pin-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~Dir() { std::filesystem::remove_all(path); }
};

files::DatabaseFile sqlite_file(const std::string& path) { return {path, "SQLite database", {"-wal", "-shm"}}; }

}  // namespace

TEST_CASE("database file: a symlink at a companion is refused, never followed") {
  Dir dir;
  for (const char* suffix : {"-wal", "-shm", "-wake"}) {
    CAPTURE(suffix);
    const std::string db = dir.path + "/db" + suffix + ".db", target = dir.path + "/target" + suffix;
    std::filesystem::create_symlink(target, db + suffix);
    auto pinned = files::pin_database_file(sqlite_file(db), false, {"-wake"});
    REQUIRE_FALSE(pinned.has_value());
    CHECK(pinned.error().kind == ErrorKind::config);
    CHECK(contains(pinned.error().message, db + suffix + " is a symbolic link"));
    CHECK_FALSE(std::filesystem::exists(target));
  }
}

TEST_CASE("database file: the pinned file is the one opened; another in its place is refused") {
  Dir dir;
  const std::string db = dir.path + "/a.db", other = dir.path + "/b.db";
  auto pinned = files::pin_database_file(sqlite_file(db), false, {"-wake"});
  REQUIRE(pinned.has_value());
  CHECK(files::check_opened(sqlite_file(db), *pinned, db).has_value());
  REQUIRE(files::pin_database_file(sqlite_file(other), false, {}).has_value());
  auto swapped = files::check_opened(sqlite_file(db), *pinned, other);
  REQUIRE_FALSE(swapped.has_value());
  CHECK(swapped.error().kind == ErrorKind::config);
  CHECK(contains(swapped.error().message, "replaced while it was opened"));
}

TEST_CASE("database file: in a sticky world-writable directory dblock makes the -wal and -shm itself") {
  Dir dir;
  REQUIRE(::chmod(dir.path.c_str(), 01777) == 0);
  const std::string db = dir.path + "/a.db";
  REQUIRE(files::pin_database_file(sqlite_file(db), false, {"-wake"}).has_value());
  for (const char* suffix : {"-wal", "-shm"}) {
    struct stat st{};
    REQUIRE(::lstat((db + suffix).c_str(), &st) == 0);
    CHECK(S_ISREG(st.st_mode));
    CHECK(st.st_uid == ::geteuid());
  }
  CHECK_FALSE(std::filesystem::exists(db + "-wake"));  // made by the first waiter, as before
}

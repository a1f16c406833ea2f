// dblock's SQLite VFS (src/backends/sqlite/sqlite_vfs.cpp) over a fake VFS that plays the
// unix VFS's answers, including the one a race with another process gives.
#include <doctest/doctest.h>
#include <sqlite3.h>

#include <string>
#include <vector>

#include "backends/sqlite/sqlite_vfs.hpp"

using dblock::sqlite::open_keeping_wal;

namespace {

// What the fake VFS does with an open that lacks SQLITE_OPEN_CREATE.
enum class WithoutCreate { missing, read_write, read_only };

struct FakeVfs;
// The file the fake opens: SQLite's base, then a way back to its VFS for xClose.
struct FakeFile {
  sqlite3_file base;
  FakeVfs* vfs;
};

struct FakeVfs {
  WithoutCreate without_create = WithoutCreate::read_write;
  std::vector<int> opens;  // the flags of every xOpen, in order
  int open_files = 0;      // opened and not yet closed
  sqlite3_vfs vfs{};
  sqlite3_io_methods methods{};

  FakeVfs() {
    vfs.iVersion = 1;
    vfs.szOsFile = sizeof(FakeFile);
    vfs.zName = "fake";
    vfs.pAppData = this;
    vfs.xOpen = &open;
    methods.iVersion = 1;
    methods.xClose = &close;
  }

  static FakeVfs& of(sqlite3_vfs* vfs) { return *static_cast<FakeVfs*>(vfs->pAppData); }

  // Like the unix VFS: a read-write open that fails falls back to read-only, and reports it.
  static int open(sqlite3_vfs* vfs, sqlite3_filename, sqlite3_file* file, int flags, int* out_flags) {
    FakeVfs& fake = of(vfs);
    fake.opens.push_back(flags);
    file->pMethods = nullptr;
    int opened = flags;
    if (!(flags & SQLITE_OPEN_CREATE)) {
      if (fake.without_create == WithoutCreate::missing) return SQLITE_CANTOPEN;
      if (fake.without_create == WithoutCreate::read_only)
        opened = (flags & ~SQLITE_OPEN_READWRITE) | SQLITE_OPEN_READONLY;
    }
    file->pMethods = &fake.methods;
    reinterpret_cast<FakeFile*>(file)->vfs = &fake;
    ++fake.open_files;
    if (out_flags) *out_flags = opened;
    return SQLITE_OK;
  }
  static int close(sqlite3_file* file) {
    --reinterpret_cast<FakeFile*>(file)->vfs->open_files;
    return SQLITE_OK;
  }
};

struct Opened {
  int rc;
  int out_flags;
};

Opened open_through(FakeVfs& fake, int flags) {
  FakeFile file{};
  int out = 0;
  const int rc = open_keeping_wal(&fake.vfs, "/db-wal", &file.base, flags, &out);
  return {rc, out};
}

bool has(int flags, int flag) { return (flags & flag) != 0; }

constexpr int wal_flags = SQLITE_OPEN_WAL | SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;

}  // namespace

TEST_CASE("sqlite vfs: an existing WAL is opened without the create flag") {
  FakeVfs fake;
  auto got = open_through(fake, wal_flags);
  CHECK(got.rc == SQLITE_OK);
  REQUIRE(fake.opens.size() == 1);
  CHECK_FALSE(has(fake.opens[0], SQLITE_OPEN_CREATE));
  CHECK(has(got.out_flags, SQLITE_OPEN_READWRITE));
  CHECK(fake.open_files == 1);
}

TEST_CASE("sqlite vfs: a missing WAL is created as SQLite asked") {
  FakeVfs fake;
  fake.without_create = WithoutCreate::missing;
  auto got = open_through(fake, wal_flags);
  CHECK(got.rc == SQLITE_OK);
  REQUIRE(fake.opens.size() == 2);
  CHECK(fake.opens[1] == wal_flags);
  CHECK(has(got.out_flags, SQLITE_OPEN_READWRITE));
  CHECK(fake.open_files == 1);
}

// The race: the read-write open found no WAL, another process created it, and the unix VFS's
// read-only retry found it. That WAL must not stay open read-only.
TEST_CASE("sqlite vfs: a WAL that another process creates during the open is not left read-only") {
  FakeVfs fake;
  fake.without_create = WithoutCreate::read_only;
  auto got = open_through(fake, wal_flags);
  CHECK(got.rc == SQLITE_OK);
  REQUIRE(fake.opens.size() == 2);
  CHECK(fake.opens[1] == wal_flags);
  CHECK(has(got.out_flags, SQLITE_OPEN_READWRITE));
  CHECK_FALSE(has(got.out_flags, SQLITE_OPEN_READONLY));
  CHECK(fake.open_files == 1);  // the read-only handle was closed
}

TEST_CASE("sqlite vfs: other files and read-only opens pass through unchanged") {
  FakeVfs fake;
  const int main_db = SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  CHECK(open_through(fake, main_db).rc == SQLITE_OK);
  const int read_only_wal = SQLITE_OPEN_WAL | SQLITE_OPEN_READONLY;
  CHECK(open_through(fake, read_only_wal).rc == SQLITE_OK);
  CHECK(fake.opens == std::vector<int>{main_db, read_only_wal});
}

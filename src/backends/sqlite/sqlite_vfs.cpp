#include "backends/sqlite/sqlite_vfs.hpp"

#include <fcntl.h>

namespace dblock::sqlite {
namespace {

sqlite3_vfs* real_vfs = nullptr;
constexpr const char* vfs_name = "dblock-unix";

int open_over_real_vfs(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* file, int flags, int* out_flags) {
  return open_keeping_wal(real_vfs, name, file, flags, out_flags);
}

// The unix VFS's open(2): never through a link at the last part of a name. SQLite opens the
// database by the full path it resolved first, so a link found then is followed as before (a
// DSN through /var/run); one swapped in after that, or planted at a file SQLite creates, is not.
int open_nofollow(const char* path, int flags, int mode) {
  return ::open(path, flags | O_NOFOLLOW | O_CLOEXEC, static_cast<mode_t>(mode));
}

}  // namespace

// SQLite's unix VFS fsyncs the directory on the first sync of every WAL it opens with the
// create flag, and it always passes that flag, so every process paid a directory fsync on its
// first commit. The directory entry needs that fsync only when the open creates the file, so
// an existing WAL is opened without the flag and a missing one is created as SQLite would.
//
// Without the flag, the unix VFS answers a failed read-write open (the WAL is not there yet)
// by trying read-only, and another process can create the WAL in between: the WAL would be
// open read-only, and this connection's every write would fail with SQLITE_READONLY (seen
// when processes open a new database file at once). A read-only answer to a read-write
// request is therefore dropped and the open made again the way SQLite asked for it, which
// gives a truly read-only WAL (no permission to write it) the same answer as before.
int open_keeping_wal(sqlite3_vfs* real, sqlite3_filename name, sqlite3_file* file, int flags, int* out_flags) {
  if (name && (flags & SQLITE_OPEN_WAL) && (flags & SQLITE_OPEN_CREATE)) {
    int opened = 0;
    if (real->xOpen(real, name, file, flags & ~SQLITE_OPEN_CREATE, &opened) == SQLITE_OK) {
      if (!(opened & SQLITE_OPEN_READONLY)) {  // SQLite asks for CREATE only with READWRITE
        if (out_flags) *out_flags = opened;
        return SQLITE_OK;
      }
      file->pMethods->xClose(file);
    }
  }
  return real->xOpen(real, name, file, flags, out_flags);
}

/// Registers the VFS once per process (sqlite3_vfs_register is thread-safe; the static's
/// initialisation runs once).
const char* dblock_vfs() {
  static const bool registered = [] {
    // Before SQLite initializes (the VFS lookup does): no memory statistics, which nothing
    // reads and for which every allocation and free took a global mutex (8% of a run's
    // instructions, docs/performance.md). Too late once initialized: SQLITE_MISUSE, harmless.
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    // No page cache made ahead (SQLITE_DEFAULT_PCACHE_INITSZ, 20 pages at the first fetch):
    // SQLite writes a header into each of the 20 slots, a fresh page of memory each, where a
    // run reads a handful of the file's pages (docs/performance.md, SQLite, round five).
    sqlite3_config(SQLITE_CONFIG_PAGECACHE, nullptr, 0, 0);
    real_vfs = sqlite3_vfs_find(nullptr);
    if (!real_vfs) return false;
    if (real_vfs->iVersion < 3 || !real_vfs->xSetSystemCall ||
        real_vfs->xSetSystemCall(real_vfs, "open", reinterpret_cast<sqlite3_syscall_ptr>(&open_nofollow)) != SQLITE_OK)
      return false;
    static sqlite3_vfs vfs = *real_vfs;
    vfs.zName = vfs_name;
    vfs.pNext = nullptr;
    vfs.xOpen = &open_over_real_vfs;
    return sqlite3_vfs_register(&vfs, 0) == SQLITE_OK;
  }();
  return registered ? vfs_name : nullptr;
}

}  // namespace dblock::sqlite

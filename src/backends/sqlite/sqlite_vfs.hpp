#pragma once
// dblock's SQLite VFS: the default (unix) VFS with one change to how a WAL is opened.

#include <sqlite3.h>

namespace dblock::sqlite {

/// The name to pass to sqlite3_open_v2, registered on first use; nullptr (SQLite's default
/// VFS) if it could not be registered.
const char* dblock_vfs();

/// The VFS's xOpen over `real`, the VFS it wraps; exposed for the unit tests, which pass a
/// fake. An existing WAL is opened without SQLITE_OPEN_CREATE; everything else as `real` would.
int open_keeping_wal(sqlite3_vfs* real, sqlite3_filename name, sqlite3_file* file, int flags, int* out_flags);

}  // namespace dblock::sqlite

// The one place where SQLite result codes become dblock's portable ErrorKind.
// Decided on the (extended) result code and the OS errno only, never on message text; the
// code travels on as Error::native_code.
// A busy timeout that expires is `connection`, not `busy`: `busy` means "the lock is held by
// someone", while a database file locked for seconds means the coordinator is unusable.

#include <cerrno>
#include <cstring>

#include "backends/sqlite/sqlite_connection.hpp"

namespace dblock::sqlite {

ErrorKind error_kind(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
    case SQLITE_FULL:
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
    case SQLITE_PROTOCOL:
    case SQLITE_NOLFS:
      return ErrorKind::connection;
    case SQLITE_MISUSE:
    case SQLITE_RANGE:
    case SQLITE_INTERNAL:
      return ErrorKind::internal;
    // The code of "no such table" and "no such column", and of many other mistakes: the one
    // more attempt after repair_schema tells them apart.
    case SQLITE_ERROR:
      return ErrorKind::schema_missing;
    default:  // SQLITE_CONSTRAINT, SQLITE_MISMATCH, SQLITE_TOOBIG, SQLITE_NOMEM...
      return ErrorKind::other;
  }
}

Error make_error(const Connection& conn, int rc, std::string_view doing) {
  const std::string where = "SQLite database " + conn.path();
  const int primary = rc & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED)
    return Error{ErrorKind::connection,
                 where + " stayed locked by another process for longer than the busy timeout (" +
                     std::to_string(conn.busy_timeout().count()) + " ms) while " + std::string(doing),
                 rc};
  std::string reason = conn.get() ? sqlite3_errmsg(conn.get()) : sqlite3_errstr(rc);
  const int os_error = conn.get() ? sqlite3_system_errno(conn.get()) : 0;
  if (primary == SQLITE_READONLY) reason = "the database is read-only (check the file's and directory's permissions)";
  // A full disk arrives as SQLITE_FULL when the database or its WAL cannot grow, but as an
  // SQLITE_IOERR_* (e.g. SHMSIZE, WRITE) when the -shm or -wal file cannot be created or
  // extended; the OS error tells the two "disk I/O error"s apart.
  const bool disk_full =
      primary == SQLITE_FULL || (primary == SQLITE_IOERR && (os_error == ENOSPC || os_error == EDQUOT));
  if (disk_full)
    reason = "the file system holding the database is full (" +
             std::string(std::strerror(os_error != 0 ? os_error : ENOSPC)) +
             "): free space there (the database needs room for its -wal and -shm files too)";
  else if (primary == SQLITE_CANTOPEN || primary == SQLITE_IOERR || primary == SQLITE_READONLY ||
           primary == SQLITE_PERM) {
    if (os_error != 0) reason += std::string(" (") + std::strerror(os_error) + ")";
  }
  return Error{error_kind(rc), where + ": " + std::string(doing) + " failed: " + reason, rc};
}

}  // namespace dblock::sqlite

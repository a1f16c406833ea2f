#pragma once
// A database kept in one file (SQLite): before it is opened, the checks that turn what the
// library would only call "unable to open" into a message naming the part of the path, its
// mode, owner and group, and the fix; and the refusal of a path another user could have put
// a database of their own on. Nothing here opens the database.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/sql/sql_session.hpp"

namespace dblock::files {

/// The database file, the files its library makes next to it (suffixes: "-wal", "-shm") and how
/// messages name it ("SQLite database": "the SQLite database PATH").
struct DatabaseFile {
  std::string path;
  std::string kind;
  std::vector<std::string> companions;
  std::string named() const { return "the " + kind + " " + path; }
};

/// The directory part of `path` ("." without one).
std::string parent_dir(const std::string& path);

/// Refuses (ErrorKind::config) a path on which another user could put a database of their own:
/// a symlink someone else made in a sticky world-writable directory such as /tmp (the kernel's
/// fs.protected_symlinks rule, whatever the sysctl says), and for the default location
/// (`private_root` not empty) any part, from the file up to private_root, that is not owned by
/// this user or root or that others may write: the rule ssh(1) applies to ~/.ssh. A part that
/// does not exist yet is made by this user, in a directory only it may write.
Result<void> check_path_owners(const DatabaseFile& db, const std::string& private_root);

/// The file's directory exists; with `create` (only the default location) it is made (0755).
/// A missing directory in a DSN someone wrote is most likely a typo, which must not become a
/// second, empty lock database: ErrorKind::config naming it.
Result<void> check_directory(const DatabaseFile& db, bool create);

/// A directory on the way that this user may not enter: ErrorKind::config naming it and the fix.
Result<void> check_reachable(const DatabaseFile& db);

/// Fails early, with the OS's reason and the fix: a directory on the way this user may not
/// enter, the file or a companion it may not write, or a directory it may not write when the
/// file or a companion must be created there. Permission denied is ErrorKind::config (the
/// setup's to fix); another reason (a read-only file system, an I/O error) ErrorKind::connection.
Result<void> check_writable(const DatabaseFile& db, bool create_directories);

/// The file may be read; the same errors as check_writable.
Result<void> check_readable(const DatabaseFile& db);

/// Creates a missing file, so that it gets the mode open(2) gives: 0666 less the umask (SQLite
/// would make it 0644 whatever the umask), which with umask 002 makes it writable by its group,
/// and SQLite gives its companions the file's mode. In a setgid directory the group is the
/// directory's. The default location (`private_default`) stays 0644 less the umask.
Result<void> create_database_file(const DatabaseFile& db, bool private_default);

/// The file: URI (RFC 8089) of an absolute path, '?', '#' and '%' escaped, with `query`.
std::string file_uri(const std::string& path, std::string_view query);

/// The network file system `dir` is on (NFS, SMB, FUSE, ...), whose file locks a database that
/// locks its file cannot trust; nullopt on a local one. ErrorKind::other when statfs(2) fails.
Result<std::optional<std::string_view>> network_filesystem(const std::string& dir);

/// A release signal (sql_session.hpp) that fires when a file is written: every commit of a
/// database with a write-ahead log appends to that log (kept between runs), so a change means a
/// release may have happened. Other keys' commits wake it too; each costs one attempt. Without
/// the file (or inotify) the waiter falls back to core's backoff. The watch is made on first
/// use: only a run that waits pays for it.
class FileWatch final : public sql::ReleaseSignal {
 public:
  explicit FileWatch(std::string path) : path_(std::move(path)) {}
  FileWatch(const FileWatch&) = delete;
  FileWatch& operator=(const FileWatch&) = delete;
  ~FileWatch() override;
  int fd() const override;
  void consume() override;

 private:
  std::string path_;
  mutable int fd_ = -1;
  mutable bool failed_ = false;
};

}  // namespace dblock::files

#pragma once
// A database kept in one file (SQLite): before it is opened, the checks that turn what the
// library would only call "unable to open" into a message naming the part of the path, its
// mode, owner and group, and the fix; and the refusal of a path another user could have put
// a database of their own on. Nothing here opens the database.

#include <optional>
#include <memory>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

struct stat;

#include "core/error.hpp"

namespace dblock::files {

/// The database file, the files its library makes next to it (suffixes: "-wal", "-shm") and how
/// messages name it ("SQLite database": "the SQLite database PATH").
struct DatabaseFile {
  std::string path;
  std::string kind;
  std::vector<std::string> companions;
  std::string named() const { return "the " + kind + " " + path; }
};

/// The fix for user `me`, outside `group`, to get `bits` ("rw", "x", ...) on `files`: join the
/// group, unless it is root's or the owner's own (`owners_group`), which would give `me` far
/// more than these files; then a group of their own for the users who share them.
std::string group_fix(const std::string& me, const std::string& group, bool owners_group, const char* bits,
                      const std::string& files);

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

/// A file's identity (st_dev, st_ino): what a path named when dblock checked it.
struct FileId {
  std::uint64_t dev = 0, ino = 0;
  bool operator==(const FileId&) const = default;
};

/// Creates a missing file, so that it gets the mode open(2) gives: 0666 less the umask (SQLite
/// would make it 0644 whatever the umask), which with umask 002 makes it writable by its group,
/// and SQLite gives its companions the file's mode. In a setgid directory the group is the
/// directory's. The default location (`private_default`) stays 0644 less the umask. Then
/// checks, without following a link, what the path and each companion (and each of `checked`,
/// files dblock makes itself, such as "-wake") name, and refuses (ErrorKind::config) what
/// another user could swap or made: something other than a regular file; a companion that is a
/// symbolic link; a hard link to another user's file; in a sticky world-writable directory, a
/// file owned by neither this user nor the directory's owner (the kernel's fs.protected_regular
/// rule), and there the missing companions are created by dblock (O_EXCL, never through a
/// link), so that no name SQLite opens can be held by another user. Returns the database's
/// identity, for check_opened.
Result<FileId> pin_database_file(const DatabaseFile& db, bool private_default, const std::vector<std::string>& checked);

/// The checks of pin_database_file on an existing file, creating nothing; a reader
/// (`writing` false) is not refused another user's file in a sticky directory (it only reads).
Result<FileId> inspect_database_file(const DatabaseFile& db, const std::vector<std::string>& checked, bool writing);

/// After the library opened `opened` (its full path name for the database): refuses
/// (ErrorKind::config) a file other than the one pin_database_file checked, which another user
/// swapped in between.
Result<void> check_opened(const DatabaseFile& db, const FileId& pinned, const std::string& opened);

/// True when `dir` is sticky and world-writable (/tmp): a place where another user may put a
/// name of their own next to the database's.
bool shared_sticky_directory(const std::string& dir);

/// The file: URI (RFC 8089) of an absolute path, '?', '#' and '%' escaped, with `query`.
std::string file_uri(const std::string& path, std::string_view query);

/// The network file system `dir` is on (NFS, SMB, FUSE, ...), whose file locks a database that
/// locks its file cannot trust; nullopt on a local one. ErrorKind::other when statfs(2) fails.
Result<std::optional<std::string_view>> network_filesystem(const std::string& dir);

/// Refuses (ErrorKind::config) what `file` (one of db's names, `st` its lstat or fstat) must not
/// be: not a regular file, a companion that is a link, a hard link to another user's file, or in
/// a sticky world-writable directory a file another user made (pin_database_file's rules;
/// `writing` false: a reader is not refused another user's file there).
Result<void> check_entry(const std::string& file, const struct stat& st, const DatabaseFile& db, bool writing = true);

}  // namespace dblock::files

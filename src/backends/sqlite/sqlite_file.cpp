#include "backends/sqlite/sqlite_file.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <optional>
#include <system_error>


namespace dblock::files {
namespace {

/// mkdir -p with mode 0755; an existing directory is fine.
Result<void> make_dirs(const std::string& path, const DatabaseFile& db) {
  for (std::size_t next = 0; next != std::string::npos;) {
    next = path.find('/', next + 1);
    const std::string partial = path.substr(0, next);
    if (::mkdir(partial.c_str(), 0755) == 0) continue;
    int err = errno;
    struct stat st{};
    if (err == EEXIST && ::stat(partial.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
    if (err == EEXIST) err = ENOTDIR;
    return fail(ErrorKind::connection, "cannot create the directory " + partial + " for " + db.named() + ": " + std::strerror(err));
  }
  return {};
}

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

std::string user_name(uid_t uid) {
  std::array<char, 1024> buf{};
  struct passwd pw{};
  struct passwd* found = nullptr;
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found) return found->pw_name;
  return "uid " + std::to_string(uid);
}

std::string group_name(gid_t gid) {
  std::array<char, 4096> buf{};
  struct group gr{};
  struct group* found = nullptr;
  if (::getgrgid_r(gid, &gr, buf.data(), buf.size(), &found) == 0 && found) return found->gr_name;
  return std::to_string(gid);
}

bool in_group(gid_t gid) {
  if (::getegid() == gid) return true;
  const int count = ::getgroups(0, nullptr);
  if (count <= 0) return false;
  std::vector<gid_t> groups(static_cast<std::size_t>(count));
  const int got = ::getgroups(count, groups.data());
  return got > 0 && std::find(groups.begin(), groups.begin() + got, gid) != groups.begin() + got;
}

/// Why this user may not do `what` ("enter", "write", "read") to `name`, and the command that
/// lets it: the reason is the part's mode, owner and group, as ls -l would show them, and the
/// fix is the chmod its owner or root runs on `files`, or the group this user must join.
std::string denied(const std::string& name, const std::string& what, const char* bits, const std::string& files) {
  const std::string me = user_name(::geteuid());
  std::string text = "user " + me + " may not " + what + " " + name;
  struct stat st{};
  if (::stat(name.c_str(), &st) != 0) return text + ": " + std::strerror(EACCES);
  const std::string owner = user_name(st.st_uid);
  const std::string group = group_name(st.st_gid);
  text += " (mode " + octal_mode(st.st_mode) + ", owner " + owner + ", group " + group + "): " + std::strerror(EACCES);
  if (st.st_uid == ::geteuid()) return text + "; fix: chmod u+" + bits + " " + files;
  const std::string as = st.st_uid == 0 ? "root" : owner + " or root";
  if (in_group(st.st_gid)) return text + "; fix, as " + as + ": chmod g+" + bits + " " + files;
  std::array<char, 1024> buf{};
  struct passwd pw{};
  struct passwd* found = nullptr;
  const bool owners_group = st.st_gid == 0 || group == owner ||
                            (::getpwuid_r(st.st_uid, &pw, buf.data(), buf.size(), &found) == 0 && found &&
                             found->pw_gid == st.st_gid);
  return text + "; " + group_fix(me, group, owners_group, bits, files);
}

/// The first directory on the way to `dir`, from the root down, that this user may not enter.
/// A part that is missing or no directory ends the search: check_directory names it.
std::optional<std::string> closed_directory(const std::string& dir) {
  std::vector<std::string> parts;
  for (std::string part = dir;; part = parent_dir(part)) {
    parts.push_back(part);
    if (part == "/" || part == ".") break;
  }
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    struct stat st{};
    if (::stat(it->c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
    if (::access(it->c_str(), X_OK) != 0 && errno == EACCES) return *it;
  }
  return std::nullopt;
}

/// The database and those of its companions that exist, for a chmod that shares them all.
std::string database_files(const DatabaseFile& db) {
  std::string files = db.path;
  for (const std::string& suffix : db.companions)
    if (::access((db.path + suffix).c_str(), F_OK) == 0) files += " " + db.path + suffix;
  return files;
}

/// Permission denied is the setup's to fix: ErrorKind::config (exit 78) with `denial` (from
/// denied(): who, what, and the fix). Any other reason (a read-only file system, an I/O error)
/// leaves the database unusable: ErrorKind::connection with the OS's words.
std::unexpected<Error> access_error(int err, const std::string& doing, const std::string& denial) {
  if (err == EACCES || err == EPERM) return std::unexpected(Error{ErrorKind::config, doing + ": " + denial});
  return std::unexpected(Error{ErrorKind::connection, doing + ": " + std::strerror(err)});
}

}  // namespace

std::string group_fix(const std::string& me, const std::string& group, bool owners_group, const char* bits,
                      const std::string& files) {
  const std::string see = " (dblock(1), SHARING A DATABASE FILE)";
  if (!owners_group)
    return "fix, as root: add " + me + " to group " + group + " (usermod -aG " + group + " " + me + "), or give " +
           files + " a group " + me + " is in and chmod g+" + bits + see;
  return "fix, as root: give " + files + " a group of their own for the users who share it (groupadd dblock; chgrp dblock " +
         files + "; chmod g+" + bits + " " + files + "; usermod -aG dblock " + me + ")" + see;
}

std::string parent_dir(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Result<void> check_directory(const DatabaseFile& db, bool create) {
  const std::string dir = parent_dir(db.path);
  if (create) return make_dirs(dir, db);
  struct stat st{};
  const bool exists = ::stat(dir.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) return {};
  const std::string why = exists            ? " is not a directory"
                          : errno == ENOENT ? " does not exist"
                                            : std::string(" is unusable: ") + std::strerror(errno);
  return fail(ErrorKind::config,
              "the directory " + dir + " of " + db.named() + why + " (create it, or fix the DSN)");
}

Result<void> check_path_owners(const DatabaseFile& db, const std::string& private_root) {
  const std::string& path = db.path;
  const uid_t me = ::geteuid();
  auto refuse = [&](const std::string& part, const std::string& why) {
    return fail(ErrorKind::config, "refusing " + db.named() + ": " + part + " " + why);
  };
  bool in_private_part = !private_root.empty();
  for (std::string part = path;; part = parent_dir(part)) {
    struct stat entry{};
    if (::lstat(part.c_str(), &entry) == 0 && S_ISLNK(entry.st_mode) && entry.st_uid != me && entry.st_uid != 0) {
      const std::string dir = parent_dir(part);
      struct stat parent{};
      if (::stat(dir.c_str(), &parent) == 0 && (parent.st_mode & S_ISVTX) && (parent.st_mode & S_IWOTH) &&
          entry.st_uid != parent.st_uid)
        return refuse(part, "is a symlink that uid " + std::to_string(entry.st_uid) +
                                " made in the world-writable directory " + dir + ": it is not followed");
    }
    struct stat target{};
    if (in_private_part && ::stat(part.c_str(), &target) == 0) {
      const std::string anyway = " (the default location must be yours; give a DSN naming it to use it anyway)";
      if (target.st_uid != me && target.st_uid != 0)
        return refuse(part, "is owned by uid " + std::to_string(target.st_uid) + anyway);
      if (target.st_mode & (S_IWGRP | S_IWOTH))
        return refuse(part, "may be written by others (mode " + octal_mode(target.st_mode) + ")" + anyway);
    }
    if (part == private_root) in_private_part = false;
    if (part == "/" || part == ".") return {};
  }
}

Result<void> check_reachable(const DatabaseFile& db) {
  auto closed = closed_directory(parent_dir(db.path));
  if (!closed) return {};
  return fail(ErrorKind::config,
              "cannot reach " + db.named() + ": " + denied(*closed, "enter the directory", "x", *closed));
}

Result<void> check_writable(const DatabaseFile& db, bool create_directories) {
  const std::string& path = db.path;
  const std::string dir = parent_dir(path);
  if (auto ok = check_reachable(db); !ok) return ok;
  if (auto ok = check_directory(db, create_directories); !ok) return ok;
  std::string missing;
  std::vector<std::string> files{path};
  for (const std::string& suffix : db.companions) files.push_back(path + suffix);
  for (const std::string& file : files) {
    if (::access(file.c_str(), F_OK) != 0) {
      if (missing.empty()) missing = file;
      continue;
    }
    if (::access(file.c_str(), R_OK | W_OK) == 0) continue;
    const int err = errno;
    // Gone since the first look (a name someone else renames or removes as we look): missing,
    // as if the first look had found nothing; what stands there is judged when it is pinned.
    if (err == ENOENT) {
      if (missing.empty()) missing = file;
      continue;
    }
    return access_error(err, "cannot write " + db.named(),
                        denied(file, "write", "rw", database_files(db)));
  }
  if (missing.empty() || ::access(dir.c_str(), W_OK | X_OK) == 0) return {};
  const int err = errno;
  const bool database = missing == path;
  const std::string doing = database ? "cannot create " + db.named()
                                     : "cannot create " + missing + ", which " + db.named() + " needs";
  // g+ws: setgid, so that what is created there takes the directory's group, not the creator's.
  std::string denial = denied(dir, "write the directory", "ws", dir);
  if (database) denial += "; or let a user who may write there create it (umask 002; dblock init)";
  return access_error(err, doing, denial);
}

bool shared_sticky_directory(const std::string& dir) {
  struct stat st{};
  return ::stat(dir.c_str(), &st) == 0 && (st.st_mode & S_ISVTX) && (st.st_mode & S_IWOTH);
}

namespace {

/// What stands at `file`, by descriptor and without following a link (O_PATH|O_NOFOLLOW: a
/// link is reported as one); nullopt when nothing does.
Result<std::optional<struct stat>> entry_at(const std::string& file, const DatabaseFile& db) {
  const int fd = ::open(file.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    return fail(ErrorKind::connection, "cannot inspect " + file + " for " + db.named() + ": " + std::strerror(errno));
  }
  struct stat st{};
  const int rc = ::fstat(fd, &st);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return fail(ErrorKind::connection, "cannot inspect " + file + " for " + db.named() + ": " + std::strerror(err));
  return st;
}

/// Refuses a regular file `st` at `file` that another user could swap or that is theirs (to
/// write, `writing`; a reader is refused only a second name of another user's file).
}  // namespace

Result<void> check_entry(const std::string& file, const struct stat& st, const DatabaseFile& db, bool writing) {
  auto refuse = [&](const std::string& why) {
    return fail(ErrorKind::config, "refusing " + db.named() + ": " + file + " " + why);
  };
  const uid_t me = ::geteuid();
  // Nothing another user could swap: unusable, as SQLite would have said (a directory, a fifo).
  if (!S_ISREG(st.st_mode))
    return fail(ErrorKind::connection, "cannot open " + db.named() + ": " + file + " is not a regular file");
  if (st.st_nlink > 1 && st.st_uid != me)
    return refuse("is a hard link (" + std::to_string(st.st_nlink) + " names) to a file of " + user_name(st.st_uid) +
                  ": another user's file is not written through a second name (remove the link)");
  const std::string dir = parent_dir(file);
  struct stat parent{};
  if (writing && ::stat(dir.c_str(), &parent) == 0 && (parent.st_mode & S_ISVTX) && (parent.st_mode & S_IWOTH) &&
      st.st_uid != me && st.st_uid != parent.st_uid)
    return refuse("belongs to " + user_name(st.st_uid) + " in the world-writable directory " + dir +
                  ", who could swap it for a link at any time (the kernel's fs.protected_regular rule): "
                  "remove it, or keep the database in a directory only trusted users may write");
  return {};
}

namespace {

/// Creates `file` for `db` without following a link (O_EXCL): false when something is there.
Result<bool> create_new(const std::string& file, mode_t mode, const DatabaseFile& db, const struct stat* owner_of) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    const int err = errno;
    if (err == EEXIST) return false;  // another process made it first: checked as found
    return access_error(err, "cannot create " + file + " for " + db.named(), std::strerror(err));
  }
  // As SQLite does with the -wal and -shm it makes: the database's mode, and root hands them
  // to the database's owner.
  if (owner_of) {
    if (::geteuid() == 0 && owner_of->st_uid != 0) (void)::fchown(fd, owner_of->st_uid, owner_of->st_gid);
    (void)::fchmod(fd, mode);
  }
  ::close(fd);
  return true;
}

}  // namespace

Result<FileId> pin_database_file(const DatabaseFile& db, bool private_default, const std::vector<std::string>& checked) {
  auto made = create_new(db.path, private_default ? 0644 : 0666, db, nullptr);
  if (!made) return std::unexpected(made.error());
  return inspect_database_file(db, checked, true);
}

Result<FileId> inspect_database_file(const DatabaseFile& db, const std::vector<std::string>& checked, bool writing) {
  const std::string& path = db.path;
  auto found = entry_at(path, db);
  if (!found) return std::unexpected(found.error());
  if (!*found) return fail(ErrorKind::connection, db.named() + " disappeared while it was opened");
  struct stat st = **found;
  std::string file = path;
  if (S_ISLNK(st.st_mode)) {
    // What check_path_owners saw may have been swapped for this link since: its rule again, on
    // the link itself; then what the link names is checked.
    const std::string dir = parent_dir(path);
    struct stat parent{};
    if (st.st_uid != ::geteuid() && st.st_uid != 0 && ::stat(dir.c_str(), &parent) == 0 &&
        (parent.st_mode & S_ISVTX) && (parent.st_mode & S_IWOTH) && st.st_uid != parent.st_uid)
      return fail(ErrorKind::config, "refusing " + db.named() + ": " + path + " is a symlink that " +
                                         user_name(st.st_uid) + " made in the world-writable directory " + dir +
                                         ": it is not followed");
    char resolved[PATH_MAX];
    if (!::realpath(path.c_str(), resolved) || ::stat(resolved, &st) != 0)
      return fail(ErrorKind::config, "refusing " + db.named() + ": it is a symbolic link to nothing usable (" +
                                         std::strerror(errno) + ")");
    file = resolved;
  }
  if (auto ok = check_entry(file, st, db, writing); !ok) return std::unexpected(ok.error());
  // The library's companions sit next to the file it resolved; dblock's own next to the name.
  std::vector<std::string> companions;
  for (const std::string& suffix : db.companions) companions.push_back(file + suffix);
  const std::size_t library_made = companions.size();
  for (const std::string& suffix : checked) companions.push_back(path + suffix);
  const bool sticky = shared_sticky_directory(parent_dir(file));
  for (std::size_t i = 0; i < companions.size(); ++i) {
    const std::string& companion = companions[i];
    if (writing && sticky && i < library_made) {
      auto created = create_new(companion, st.st_mode & 0666, db, &st);
      if (!created) return std::unexpected(created.error());
    }
    auto at = entry_at(companion, db);
    if (!at) return std::unexpected(at.error());
    if (!*at) continue;
    if (S_ISLNK((*at)->st_mode))
      return fail(ErrorKind::config, "refusing " + db.named() + ": " + companion + " is a symbolic link (owner " +
                                         user_name((*at)->st_uid) + "), which is never followed: remove it");
    if (auto ok = check_entry(companion, **at, db, writing); !ok) return std::unexpected(ok.error());
  }
  return FileId{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
}

Result<void> check_opened(const DatabaseFile& db, const FileId& pinned, const std::string& opened) {
  struct stat st{};
  if (::stat(opened.c_str(), &st) == 0 &&
      FileId{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)} == pinned)
    return {};
  return fail(ErrorKind::config, "refusing " + db.named() + ": it was replaced while it was opened (the library opened " +
                                     opened + "); another user may write its directory");
}

Result<void> check_readable(const DatabaseFile& db) {
  if (::access(db.path.c_str(), R_OK) == 0) return {};
  const int err = errno;
  return access_error(err, "cannot read " + db.named(), denied(db.path, "read", "r", db.path));
}

std::string file_uri(const std::string& path, std::string_view query) {
  std::string uri = "file:";
  for (char c : path) {
    char escaped[4];
    std::snprintf(escaped, sizeof escaped, "%%%02X", static_cast<unsigned char>(c));
    uri += c == '?' || c == '#' || c == '%' ? std::string(escaped) : std::string(1, c);
  }
  return uri + "?" + std::string(query);
}

Result<std::optional<std::string_view>> network_filesystem(const std::string& dir) {
  // statfs(2) f_type values.
  static constexpr std::pair<unsigned long, std::string_view> network[] = {
      {0x6969, "NFS"},      {0x517B, "SMB"},      {0xFF534D42, "CIFS"}, {0xFE534D42, "SMB2"}, {0x65735546, "FUSE"},
      {0x00C36400, "Ceph"}, {0x01021997, "9p"},   {0x5346414F, "AFS"},  {0x73757245, "Coda"}, {0x01161970, "GFS2"},
      {0x7461636F, "OCFS2"}, {0x0BD00BD0, "Lustre"}, {0x47504653, "GPFS"},
  };
  struct statfs fs{};
  if (::statfs(dir.c_str(), &fs) != 0)
    return fail(ErrorKind::other, "cannot inspect the file system of " + dir + ": " + std::strerror(errno));
  const auto magic = static_cast<unsigned long>(fs.f_type) & 0xFFFFFFFFUL;
  for (const auto& [known, name] : network)
    if (known == magic) return name;
  return std::nullopt;
}

}  // namespace dblock::files

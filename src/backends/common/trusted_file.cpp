#include "backends/common/trusted_file.hpp"

#include <pwd.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace dblock {
namespace {

// "uid 1001 (farm1)", or "uid 1001" when the passwd database has no name for it.
std::string user_label(uid_t uid) {
  std::string label = "uid " + std::to_string(uid);
  const long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buffer(size > 0 ? static_cast<std::size_t>(size) : 16384);
  passwd entry{};
  passwd* found = nullptr;
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found)
    label += std::string(" (") + found->pw_name + ")";
  return label;
}

std::string user_name(uid_t uid) {
  const std::string label = user_label(uid);
  const std::size_t open = label.find('(');
  return open == std::string::npos ? std::to_string(uid) : label.substr(open + 1, label.size() - open - 2);
}

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// The directories above `path`, nearest first, up to "/".
std::vector<std::string> directories_above(const std::string& path) {
  std::vector<std::string> out;
  std::string dir = path;
  while (true) {
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    const std::size_t slash = dir.rfind('/');
    if (slash == std::string::npos) break;
    dir = slash == 0 ? "/" : dir.substr(0, slash);
    out.push_back(dir);
    if (dir == "/") break;
  }
  return out;
}

}  // namespace

Result<void> trusted_file(const std::string& what, const std::string& path, const struct stat& st) {
  // /dev/null (DBLOCK_CONFIG=/dev/null: no config) reads as empty whoever writes to it.
  if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)) return {};
  const uid_t me = ::geteuid();
  const std::string trusted = me == 0 ? "root" : "root or " + user_label(me);
  if (st.st_uid != 0 && st.st_uid != me)
    return fail(ErrorKind::config, what + " belongs to " + user_label(st.st_uid) + ", not to " + trusted +
                      ": refused, as its owner decides what dblock does (as root: chown " +
                      user_name(me) + " " + path + ")");
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return fail(ErrorKind::config, what + " has mode " + mode_text(st.st_mode) +
                      ": users other than its owner may change it: refused (chmod go-w " +
                      path + ")");
  // The directories as named and as resolved: whoever may rename an entry in one may put
  // another file in the file's place. A sticky directory (/tmp) lets each user rename only
  // their own entries.
  std::string absolute = path;
  if (!absolute.starts_with('/')) {
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd)) absolute = std::string(cwd) + "/" + path;
  }
  std::vector<std::string> directories = directories_above(absolute);
  if (char* real = ::realpath(path.c_str(), nullptr)) {
    for (auto& dir : directories_above(real)) directories.push_back(std::move(dir));
    std::free(real);
  }
  for (const auto& dir : directories) {
    struct stat d{};
    if (::stat(dir.c_str(), &d) != 0) continue;
    if (d.st_uid != 0 && d.st_uid != me)
      return fail(ErrorKind::config, what + ": its directory " + dir + " belongs to " + user_label(d.st_uid) +
                        ", not to " + trusted +
                        ": refused, as its owner may put another file in its place (move the "
                        "file to a directory of root's or yours)");
    if ((d.st_mode & (S_IWGRP | S_IWOTH)) && !(d.st_mode & S_ISVTX))
      return fail(ErrorKind::config, what + ": its directory " + dir + " has mode " + mode_text(d.st_mode) +
                        ": users other than its owner may put another file in its place: "
                        "refused (chmod go-w " + dir + ", or +t)");
  }
  return {};
}

Result<void> trusted_existing(const std::string& kind, const std::vector<std::string>& files) {
  for (const auto& file : files) {
    struct stat st{};
    if (::stat(file.c_str(), &st) != 0) continue;
    if (auto ok = trusted_file(kind + " " + file, file, st); !ok) return ok;
  }
  return {};
}

}  // namespace dblock

#pragma once
// Files that decide where dblock connects and as whom (config file, DSN file, a MySQL option
// file) are trusted the way ssh trusts authorized_keys (dblock(1), FILES).

#include <sys/stat.h>

#include <string>
#include <vector>

#include "core/error.hpp"

namespace dblock {

/// ErrorKind::config when a user other than root and this one owns the file, when its group
/// or others may write it, or when a directory above it (as named, and as resolved) could be
/// changed by another user (one not sticky and writable by group or others, or owned by another
/// user). `what` names the file in messages; `st` is the file as opened.
Result<void> trusted_file(const std::string& what, const std::string& path, const struct stat& st);

/// trusted_file for each of `files` that exists (a client library reads those, skips the
/// rest); `kind` names them in messages ("option file", "service file").
Result<void> trusted_existing(const std::string& kind, const std::vector<std::string>& files);

}  // namespace dblock

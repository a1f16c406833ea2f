#pragma once
// sqlite:/path/to/file.db or sqlite:///path: absolute paths only, no host (dblock(1), DSN).

#include <string>

#include "backends/common/dsn.hpp"

namespace dblock::sqlite {

/// The database file the DSN names; ErrorKind::config when it names none.
Result<std::string> database_path(const Dsn& dsn);

}  // namespace dblock::sqlite

#pragma once
// MySQL/MariaDB error numbers mapped into dblock's portable ErrorKind, in one place.

#include <string>
#include <string_view>

#include "core/error.hpp"

namespace dblock::mysql {

/// The portable category of a server (ER_*) or client (CR_*) error number.
ErrorKind classify_errno(unsigned errnum);

/// An Error with the classified kind, "mysql <where>: <text> (errno N)", the errno as
/// native_code and the SQLSTATE; `where` must be redacted. Error::overloaded for a server that
/// was reached and turned the connection away for now (too many connections, dropped before
/// it answered).
Error make_error(unsigned errnum, std::string_view where, std::string_view text, std::string_view sqlstate = {});

}  // namespace dblock::mysql

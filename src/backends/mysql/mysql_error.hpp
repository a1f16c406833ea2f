#pragma once
// MySQL/MariaDB error numbers mapped into dblock's portable ErrorKind, in one place.

#include <string>
#include <string_view>

#include "core/error.hpp"

namespace dblock::mysql {

/// The portable category of a server (ER_*) or client (CR_*) error number.
ErrorKind classify_errno(unsigned errnum);

/// True when a KILL named a session the server does not know (ER_NO_SUCH_THREAD).
bool is_no_such_session(const Error& e);

/// True when a statement named a table or a column the database does not have
/// (ER_NO_SUCH_TABLE, ER_BAD_FIELD_ERROR): the schema is missing or incomplete.
bool is_schema_missing(const Error& e);

/// True when a statement was refused for want of a privilege on a table, a column or the
/// database (ER_TABLEACCESS_DENIED_ERROR, ER_COLUMNACCESS_DENIED_ERROR, ER_DBACCESS_DENIED_ERROR).
bool is_denied(const Error& e);

/// An Error with the classified kind, "mysql <where>: <text> (errno N)", the errno as
/// native_code and the SQLSTATE; `where` must be redacted. Error::overloaded for a server that
/// was reached and turned the connection away for now (too many connections, dropped before
/// it answered).
Error make_error(unsigned errnum, std::string_view where, std::string_view text, std::string_view sqlstate = {});

}  // namespace dblock::mysql

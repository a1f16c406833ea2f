#pragma once
// Who serves a session's statements: the server session it was handed at start-up, or a
// pooler's (PgBouncer, ProxySQL, MaxScale), in session or transaction mode. Asked on the
// dialect's DoctorStatements::session_id, by doctor's "pooler" line and by a dialect that must
// know before it names a prepared statement.

#include <functional>
#include <memory>

#include "core/lock_types.hpp"
#include "core/sql/sql_session.hpp"

namespace dblock::sql {

/// Whether `session`'s statements reach the server session it was handed at start-up
/// (Session::started_id): false behind a pooler, which hands out an id of its own.
Result<bool> served_directly(Session& session, const Statement& session_id);

/// doctor's "pooler" line: direct, session pooling or transaction pooling, which fails it for a
/// session strategy. `open_other` opens a second session on the same database.
DoctorCheck pooler_check(Session& session, const Statement& session_id, Strategy strategy,
                         const std::function<Result<std::unique_ptr<Session>>()>& open_other);

}  // namespace dblock::sql

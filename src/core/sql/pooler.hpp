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

/// Before a run takes `strategy`, a session strategy, on `session`: ErrorKind::config, naming
/// what conflicts and the fix, where the lock could not hold, as doctor fails it (its pooler and
/// galera lines): a Galera node (its session locks are its own), or transaction pooling (the
/// lock would stay with a server session other clients are handed). Judged on an answer read
/// already (the failover record's read): `row`'s `column` the server's id of the session, the
/// next 1 on a Galera node (`asked` names the statement in messages); on a direct connection
/// nothing more, behind a pooler also pooler_check's probe with a second session.
Result<void> session_strategy_answered(Session& session, const Rows::Row& row, int column, const std::string& asked,
                                       const Statement& session_id, Strategy strategy,
                                       const std::function<Result<std::unique_ptr<Session>>()>& open_other);

/// doctor's "pooler" line: direct, session pooling or transaction pooling, which fails it for a
/// session strategy. `open_other` opens a second session on the same database.
DoctorCheck pooler_check(Session& session, const Statement& session_id, Strategy strategy,
                         const std::function<Result<std::unique_ptr<Session>>()>& open_other);

}  // namespace dblock::sql

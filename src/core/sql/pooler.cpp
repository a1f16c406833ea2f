#include "core/sql/pooler.hpp"

#include <optional>

namespace dblock::sql {
namespace {

enum class Pooling { none, session, transaction };

// How often a session that looks pooled in session mode is asked for its server session while a
// second client holds a transaction (pooling): each ask is a round trip, paid only behind a pooler.
constexpr int session_mode_asks = 3;

// The server session that answers this statement.
Result<std::int64_t> serving(Session& session, const Statement& session_id) {
  auto r = session.run(session_id, {});
  if (!r) return std::unexpected(r.error());
  if (r->empty() || (*r)[0].is_null(0)) return fail(ErrorKind::other, session_id.id + " answered no session id");
  return (*r)[0].int64(0);
}

// A server names its own session when the connection starts; a pooler names one of its own, so
// a different answer means a pooler. Transaction pooling shows when the server session changes
// between statements, which a lone client rarely sees (a pooler hands it the session it just
// gave back), so a second client opens a transaction in between: under transaction pooling it
// gets the session this one just had (or keeps this one off it). The second client connects
// first, so that only one round trip passes between this session's statement and its
// transaction: another client of the pool handed a session meanwhile could make transaction
// pooling look like session pooling. `first`: this session's answer, when asked already.
Result<Pooling> pooling(Session& ours, const Statement& session_id,
                        const std::function<Result<std::unique_ptr<Session>>()>& open_other,
                        std::optional<std::int64_t> first = std::nullopt) {
  if (!first) {
    auto asked = serving(ours, session_id);
    if (!asked) return std::unexpected(asked.error());
    first = *asked;
  }
  auto again = serving(ours, session_id);
  if (!again) return std::unexpected(again.error());
  if (*again != *first) return Pooling::transaction;
  if (ours.started_id() == *first) return Pooling::none;
  auto other = open_other();
  if (!other) return std::unexpected(other.error());
  if (auto connected = serving(**other, session_id); !connected) return std::unexpected(connected.error());
  auto last = serving(ours, session_id);
  if (!last) return std::unexpected(last.error());
  if (*last != *first) return Pooling::transaction;
  auto tx = Transaction::begin(**other, "BEGIN");
  if (!tx) return std::unexpected(tx.error());
  auto theirs = serving(**other, session_id);
  if (!theirs) return std::unexpected(theirs.error());
  // With a pool of one, this session would wait for that transaction: ask no more.
  if (*theirs == *first) return Pooling::transaction;
  // Under session pooling this session keeps its server session whatever the pool does; under
  // transaction pooling each statement takes a free one, which is this one's old one again only
  // while no other client of the pool took it meanwhile. A busy pool can make one answer look
  // like session pooling, so it is asked a few times while the other's transaction still runs,
  // and one other answer is enough: a session strategy is refused unless every answer agrees.
  for (int ask = 0; ask < session_mode_asks; ++ask) {
    auto now = serving(ours, session_id);
    if (!now) return std::unexpected(now.error());
    if (*now != *first) return Pooling::transaction;
  }
  return Pooling::session;  // the other's transaction ends with it
}

}  // namespace

Result<bool> served_directly(Session& session, const Statement& session_id) {
  auto id = serving(session, session_id);
  if (!id) return std::unexpected(id.error());
  return *id == session.started_id();
}

Result<void> session_strategy_answered(Session& session, const Rows::Row& row, int column, const std::string& asked,
                                       const Statement& session_id, Strategy strategy,
                                       const std::function<Result<std::unique_ptr<Session>>()>& open_other) {
  if (!is_session_strategy(strategy)) return {};
  if (row.columns() < column + 2 || row.is_null(column)) return fail(ErrorKind::other, asked + " answered no session id");
  const std::string s(to_string(strategy));
  if (!row.is_null(column + 1) && row.int64(column + 1) == 1)
    return fail(ErrorKind::config,
                "--strategy " + s + " cannot hold on a Galera cluster (wsrep_on is ON at " + session.where() +
                    "): GET_LOCK, FOR UPDATE and an uncommitted INSERT lock one node only, so a run on another node "
                    "would take the key too; refused. Use --strategy lease (its rows are certified across the "
                    "cluster); `dblock doctor -s " + s + "` fails its galera line for the same reason");
  const std::int64_t first = row.int64(column);
  if (first == session.started_id()) {
    session.served_directly_seen();
    return {};
  }
  auto found = pooling(session, session_id, open_other, first);
  if (!found) return std::unexpected(found.error());
  if (*found != Pooling::transaction) return {};
  return fail(ErrorKind::config,
              "--strategy " + s + " cannot hold through transaction pooling at " + session.where() +
                  " (e.g. PgBouncer pool_mode=transaction): its lock lives in one server session, which the pooler "
                  "hands to other clients between transactions, and they could take the key too; refused. Use "
                  "--strategy lease, or connect to the server directly or through session pooling (PgBouncer "
                  "pool_mode=session); `dblock doctor -s " + s + "` fails its pooler line for the same reason");
}

DoctorCheck pooler_check(Session& session, const Statement& session_id, Strategy strategy,
                         const std::function<Result<std::unique_ptr<Session>>()>& open_other) {
  auto found = pooling(session, session_id, open_other);
  if (!found) return {"pooler", false, found.error().message};
  switch (*found) {
    case Pooling::transaction:
      return {"pooler", !is_session_strategy(strategy),
              "transaction pooling (e.g. PgBouncer pool_mode=transaction, or a proxy that multiplexes, as ProxySQL "
              "does): one server session serves several clients, one transaction each; advisory, for-update and "
              "txn-insert are unsafe here; use lease or a session-pooled/direct DSN. lease waiters (-w) may not be "
              "woken by the server here (the server's wake-ups live in a server session, which transaction pooling "
              "does not keep): they poll, with a backoff of up to a second"};
    case Pooling::session:
      return {"pooler", true,
              "a connection pooler in session mode (the server session is not the one the connection was given, and "
              "it kept this client's session): session strategies are safe while it stays in session mode"};
    case Pooling::none:
      break;
  }
  return {"pooler", true, "direct connection to the server (no pooler): session strategies are safe"};
}

}  // namespace dblock::sql

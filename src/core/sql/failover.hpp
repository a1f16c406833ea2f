#pragma once
// The failover lock-delay (dblock(1) GUARANTEES, "Failover lock-delay"; docs/backend-contract.md,
// "Failover lock-delay"), once for every strategy: a database records its incarnation
// (PostgreSQL: system identifier and timeline) in a row of its own in <prefix>locks. An acquirer that meets another incarnation than the one
// recorded (a replica was promoted, perhaps without the last grants) records the new one, moves
// the token fence past every token the new primary knows by token_jump, and nothing is granted
// until the longest TTL recorded has passed: a holder whose grant was lost cannot still be
// inside its lease by then, as it ends its command when it cannot renew.
//
// A locker calls admit() before it grants, or its take statement reads the same test itself
// (LeaseStatements::take, when it binds :record) and the locker calls admit() when it refused.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/sql/sql_session.hpp"

namespace dblock::sql {

/// What a dialect runs for the lock-delay; every statement empty: the dialect has no
/// incarnation (SQLite) and admit() costs nothing. Parameters as in statements.hpp.
struct FailoverStatements {
  /// :record :ttl_ms. One row: recorded incarnation (NULL: no record yet), current incarnation,
  /// the previous one, fence, delay_until_ms (NULL: none), now_ms, longest_ttl_ms, then the
  /// gate's parts as core spells them (rules.hpp), each 1 or 0: here (the record names the
  /// current incarnation), delayed (failover_delayed_sql), covers (failover_covers_sql); and
  /// optionally the server's id of the session that runs it (as DoctorStatements::session_id): when it is
  /// the one the session was handed at start-up, admit() tells the session
  /// (Session::served_directly_seen), which then need not ask again (PostgreSQL, before it names
  /// a statement: one round trip less on the bookkeeping session of for-update and txn-insert);
  /// then 1 on a Galera node, else 0 (where a server has sessions): a session strategy is
  /// judged on this read before its first take (ReadCheck, SqlBackend::serving_check).
  Statement read;
  /// :record :ttl_ms. Inserts the record for the current incarnation (fence 0, no delay,
  /// longest TTL :ttl_ms) unless there is one.
  Statement create;
  /// :record. The highest token of any row: (max_token).
  Statement max_token;
  /// :record :fence. When the recorded incarnation is not the current one: previous = recorded,
  /// recorded = current, fence = :fence, delay until now + longest TTL. affected: 1 when this
  /// call moved it.
  Statement move;
  /// :record :ttl_ms. longest TTL = :ttl_ms when it is longer.
  Statement raise_ttl;

  bool empty() const { return read.empty(); }
};

namespace failover {

/// The record's name in <prefix>locks: a control character, which no key may hold.
inline constexpr std::string_view record_name = "\x01"
                                                "failover";
/// How far tokens jump past the highest token the new primary knows: more grants than this of
/// one key inside the replication lag would be needed for a token to repeat.
inline constexpr std::int64_t token_jump = std::int64_t{1} << 20;

/// What admit() found.
struct Gate {
  bool open = true;           // grants may go on
  bool changed = false;       // admit() wrote the record (created it, or raised the longest TTL)
  std::int64_t fence = 0;     // tokens granted now must exceed it
  std::optional<LockDelay> delay;  // !open: the lock-delay in force
};

/// The record as read, for doctor; nullopt when the dialect has none, `recorded` empty when
/// the database has no record yet.
struct Record {
  std::string recorded, current, previous;
  std::int64_t fence = 0;
  std::optional<std::int64_t> delay_until_ms;
  std::int64_t now_ms = 0;
  std::int64_t longest_ttl_ms = 0;
  /// The gate's parts, as the read judged them (FailoverStatements::read): the record names the
  /// current incarnation, a lock-delay is in force, the TTL asked is within longest_ttl_ms.
  bool here = false, delayed = false, covers = false;
  /// The lock-delay in force at now_ms, if any.
  std::optional<LockDelay> delay() const;
};
/// `ttl`: the lease asked about (Record::covers).
Result<std::optional<Record>> read(Session& session, const FailoverStatements& st, Millis ttl = Millis(0));

/// What the record's read says of the session it ran on (FailoverStatements::read's eleventh
/// and twelfth columns, session_column and the next), judged before anything else: an error stops admit() with it.
using ReadCheck = std::function<Result<void>(Session& session, const Rows::Row& row)>;
inline constexpr int session_column = 10;

/// Before a grant of a lease of `ttl`: records the incarnation the first time, starts the
/// lock-delay when it changed, raises the longest TTL; closed while a lock-delay is in force.
/// Always open, at no cost, for a dialect without statements. `check`, when set, judges the
/// record's read first.
Result<Gate> admit(Session& session, const FailoverStatements& st, Millis ttl, const ReadCheck& check = {});

/// `dblock renew --ttl`: a lease made longer than the longest TTL recorded raises it first, so
/// a lock-delay after a failover still outlasts it. Nothing for a dialect without statements.
Result<void> cover_ttl(Session& session, const FailoverStatements& st, Millis ttl);

/// A holder's renewal of a lease of `ttl`: on another incarnation than the one recorded, starts
/// the lock-delay and moves the fence as admit() does, so the delay ends at most one TTL after
/// the new primary was first seen, not after that holder lets go; the holder itself, whose grant
/// the server has, renews on. Raises the longest TTL as cover_ttl(). Without a record, or for a
/// dialect without statements, nothing.
Result<void> notice(Session& session, const FailoverStatements& st, Millis ttl);

/// Busy for everyone: the database failed over and its lock-delay is in force.
AcquireOutcome delayed(const Gate& gate);

/// The gate found open on one connection, for leases up to `ttl`.
struct Admitted {
  Gate gate;
  Millis ttl;
};
/// admit(), asked once per connection while it stays open: the server a connection reaches
/// cannot become another incarnation, and once this server's incarnation is recorded with a
/// TTL as long as this one, only a write from another server (a split brain) could close it
/// again. `admitted` keeps the answer (`changed` only in the call that wrote); the caller resets
/// it when it reconnects.
Result<Gate> admit_once(Session& session, const FailoverStatements& st, std::optional<Admitted>& admitted, Millis ttl,
                        const ReadCheck& check = {});

/// doctor's "failover" check: the incarnation recorded and the server's, the lock-delay in
/// force or to come, and how long it would be.
DoctorCheck doctor_check(Session& session, const FailoverStatements& st);

/// "failover from X to Y" for messages.
std::string describe(std::string_view previous, std::string_view current);

}  // namespace failover
}  // namespace dblock::sql

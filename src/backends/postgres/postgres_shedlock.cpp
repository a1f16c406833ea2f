// --table-format shedlock on PostgreSQL (common/shedlock.hpp): the lease is a row of ShedLock's
// table, taken, extended and unlocked as ShedLock's PostgresSqlServerTimeStatementsSource does
// (database time as timezone('utc', CURRENT_TIMESTAMP) in a TIMESTAMP without time zone);
// dblock's own <prefix>locks row of the same name carries the fencing token, bumped in the
// same statement, and <prefix>runs the history. ShedLock never reads dblock's tables.

#include <set>
#include <utility>

#include "backends/common/lock_rows.hpp"
#include "backends/common/shedlock.hpp"
#include "backends/postgres/postgres_tables.hpp"

namespace dblock::postgres {
namespace {

// ShedLock's "now": UTC wall time of the transaction, stored without a time zone.
constexpr std::string_view now_utc = "timezone('utc', CURRENT_TIMESTAMP)";

std::string shed_table(const BackendOptions& o) { return quote_ident(o.shedlock_table); }

// A renewal: `sql` once, and once more after a reconnect when the connection failed (a lease
// survives a short outage; the statement is compared on the holder).
Result<QueryResult> exec_reconnecting(Connection& conn, const std::string& sql, const Params& p) {
  auto r = conn.is_open() ? conn.exec(sql, p) : fail(ErrorKind::connection, "not connected");
  if (!r && r.error().kind == ErrorKind::connection) {
    if (auto ok = conn.reconnect(); !ok) return std::unexpected(ok.error());
    r = conn.exec(sql, p);
  }
  return r;
}

/// name, locked_by, locked_at, lock_until, database now (ms), then dblock's token and, when
/// dblock's row is this holder's, its host and pid. A TIMESTAMP without time zone reads as UTC
/// in extract(epoch), which is what ShedLock stored.
std::string holder_select(const BackendOptions& o, const Tables& t) {
  return "SELECT s.name, s.locked_by, " + ms("s.locked_at") + ", " + ms("s.lock_until") + ", " + ms("now()") +
         ", COALESCE(l.token, 0), CASE WHEN l.owner = s.locked_by THEN l.host END, CASE WHEN l.owner = s.locked_by "
         "THEN l.pid END FROM " + shed_table(o) + " s LEFT JOIN " + t.locks + " l ON l.name = s.name";
}

class ShedlockLocker final : public Locker {
 public:
  ShedlockLocker(std::shared_ptr<Connection> conn, const BackendOptions& options, Tables t)
      : conn_(std::move(conn)), options_(options), t_(std::move(t)) {
    const std::string shed = shed_table(options_);
    const std::string until = std::string(now_utc) + " + $3::bigint * interval '1 ms'";
    // ShedLock's acquire (insert, or take over a row whose lock_until has passed), then the
    // token of dblock's row, only when the first took the row: one statement, one transaction.
    acquire_sql_ =
        "WITH taken AS (INSERT INTO " + shed + " AS s (name, lock_until, locked_at, locked_by) VALUES ($1, " + until +
        ", " + std::string(now_utc) + ", $2) ON CONFLICT (name) DO UPDATE SET lock_until = EXCLUDED.lock_until, "
        "locked_at = EXCLUDED.locked_at, locked_by = EXCLUDED.locked_by WHERE s.lock_until <= " + std::string(now_utc) +
        " RETURNING " + ms("lock_until") + " AS until), numbered AS (INSERT INTO " + t_.locks +
        " AS l (name, owner, host, pid, token, strategy, session_id, acquired_at, renewed_at, expires_at, released_at, "
        "last_started_at) SELECT $1, $2, $4, $5::bigint, 1, 'shedlock', NULL, now(), now(), NULL, NULL, now() FROM taken "
        "ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, host = EXCLUDED.host, pid = EXCLUDED.pid, "
        "token = l.token + 1, strategy = 'shedlock', session_id = NULL, acquired_at = now(), renewed_at = now(), "
        "expires_at = NULL, released_at = NULL, last_started_at = now() RETURNING token, " + ms("acquired_at") +
        " AS acq) SELECT numbered.token, numbered.acq, taken.until FROM taken, numbered";
    // ShedLock's extend: only while this holder's lock_until is still ahead.
    renew_sql_ = "UPDATE " + shed + " SET lock_until = " + until + " WHERE name = $1 AND locked_by = $2 AND lock_until > " +
                 std::string(now_utc) + " RETURNING 1";
    // ShedLock's unlock: lock_until = GREATEST(now, locked_at + lockAtLeastFor); then dblock's
    // row of the token is released and the run recorded, in the same statement.
    const std::string at_least = "locked_at + $3::bigint * interval '1 ms'";
    release_sql_ = "WITH u AS (UPDATE " + shed + " SET lock_until = CASE WHEN " + at_least + " > " +
                   std::string(now_utc) + " THEN " + at_least + " ELSE " + std::string(now_utc) +
                   " END WHERE name = $1 AND locked_by = $4 RETURNING name), m AS (UPDATE " + t_.locks +
                   " SET released_at = now(), last_finished_at = CASE WHEN $5::boolean THEN now() ELSE last_finished_at END, "
                   "last_exit_code = CASE WHEN $5::boolean THEN $6::int ELSE last_exit_code END "
                   "WHERE name = $1 AND token = $2::bigint AND released_at IS NULL RETURNING 1)" +
                   release_tail(t_, "(SELECT count(*) FROM m)", 7);
  }

  Result<AcquireOutcome> try_acquire(const LockRequest& req, Millis) override {
    if (auto ok = shedlock::check_name(req.key); !ok) return std::unexpected(ok.error());
    if (req.min_interval.count() > 0)
      return fail(ErrorKind::usage, "--min-interval needs dblock's own table: ShedLock's table keeps no last start");
    if (!conn_->is_open())
      if (auto ok = conn_->reconnect(); !ok) return std::unexpected(ok.error());
    auto r = with_tables([&] {
      return conn_->exec(acquire_sql_, {req.key, req.owner, ms_param(req.ttl), req.host, std::to_string(req.pid)});
    });
    if (!r) return std::unexpected(r.error());
    AcquireOutcome out;
    if (r->rows() == 0) {
      auto h = conn_->exec(holder_select(options_, t_) + " WHERE s.name = $1", {req.key});
      if (!h) return std::unexpected(h.error());
      if (h->rows() > 0) out.holder = read_shedlock_status(*h, 0);
      return out;
    }
    out.state = AcquireOutcome::State::acquired;
    out.token = r->int64(0, 0);
    out.acquired_at_ms = r->opt_int64(0, 1);
    out.expires_at_ms = r->opt_int64(0, 2);
    held_req_ = req;
    token_ = out.token;
    return out;
  }

  Result<void> renew(Millis ttl) override {
    if (!token_) return fail(ErrorKind::internal, "renew without a held lease");
    const Params p{held_req_.key, held_req_.owner, ms_param(ttl)};
    auto r = exec_reconnecting(*conn_, renew_sql_, p);
    if (!r) return std::unexpected(r.error());
    if (r->rows() == 0)
      return fail(ErrorKind::lost, "the ShedLock lock '" + held_req_.key + "' is no longer held by " + held_req_.owner +
                                       ": its lock_until passed or another holder took it");
    return {};
  }

  Result<void> release(const ReleaseRequest& req) override {
    if (!token_) return fail(ErrorKind::internal, "release without a held lease");
    Params p{held_req_.key,
             std::to_string(*token_),
             ms_param(req.min_hold),
             held_req_.owner,
             req.finished_run ? "true" : "false",
             req.exit_code ? Param(std::to_string(*req.exit_code)) : Param()};
    append_history_params(p, req, held_req_, *token_, Strategy::lease, options_.history_keep);
    if (!conn_->is_open())
      if (auto ok = conn_->reconnect(); !ok) return std::unexpected(ok.error());
    auto r = conn_->exec(release_sql_, p);
    if (!r) return std::unexpected(r.error());
    token_.reset();
    if (r->int64(0, 0) != 1)
      return fail(ErrorKind::lost, "the ShedLock lock '" + held_req_.key + "' was no longer ours at release");
    return {};
  }

 private:
  /// The tables are assumed (backend.hpp, make_locker): on SQLSTATE 42P01 (a table missing)
  /// dblock's and ShedLock's are made, ShedLock's only when missing, and the statement runs
  /// again; on 42703 (a column missing) the same checks name the column (ErrorKind::config).
  template <class Attempt>
  auto with_tables(Attempt&& attempt) -> decltype(attempt()) {
    auto r = attempt();
    if (r || (r.error().sqlstate != "42P01" && r.error().sqlstate != "42703")) return r;
    if (auto made = ensure_schema(*conn_, t_); !made) return std::unexpected(made.error());
    if (auto made = ensure_shedlock_table(*conn_, options_); !made) return std::unexpected(made.error());
    return attempt();
  }

  std::shared_ptr<Connection> conn_;
  BackendOptions options_;
  Tables t_;
  std::string acquire_sql_, renew_sql_, release_sql_;
  std::optional<std::int64_t> token_;
  LockRequest held_req_;
};

}  // namespace

std::unique_ptr<Locker> make_shedlock_locker(std::shared_ptr<Connection> conn, const BackendOptions& options, Tables t) {
  return std::make_unique<ShedlockLocker>(std::move(conn), options, std::move(t));
}

Result<void> ensure_shedlock_table(Connection& conn, const BackendOptions& options) {
  if (auto r = conn.exec(shedlock::ddl("postgres", shed_table(options))); !r) return std::unexpected(r.error());
  auto cols = conn.exec("SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                        "AND table_name = $1",
                        {options.shedlock_table});
  if (!cols) return std::unexpected(cols.error());
  std::set<std::string> have;
  for (int i = 0; i < cols->rows(); ++i) have.insert(cols->text(i, 0));
  for (std::string_view column : shedlock::columns)
    if (!have.contains(std::string(column)))
      return fail(ErrorKind::config, "table " + options.shedlock_table + " is not a ShedLock table: column " +
                                         std::string(column) + " is missing");
  return {};
}

std::string shedlock_status_select(const BackendOptions& options, const Tables& t) {
  return "SELECT * FROM (" + holder_select(options, t) + ") x WHERE";
}

LockStatus read_shedlock_status(const QueryResult& r, int row) {
  LockStatus s;
  s.key = r.text(row, 0);
  s.owner = r.text(row, 1);
  s.strategy = "shedlock";
  s.acquired_at_ms = r.opt_int64(row, 2);
  s.expires_at_ms = r.opt_int64(row, 3);
  s.db_now_ms = r.int64(row, 4);
  s.token = r.int64(row, 5);
  s.host = r.is_null(row, 6) ? "" : r.text(row, 6);
  s.pid = r.opt_int64(row, 7).value_or(0);
  // lock_until in the future: held (also while lockAtLeastFor keeps a finished run's lock).
  s.state = s.expires_at_ms && *s.expires_at_ms > s.db_now_ms ? LockStatus::State::held : LockStatus::State::free;
  return s;
}

}  // namespace dblock::postgres

namespace dblock::postgres {
namespace {

// The holder a stateless renew/release names ($2 owner, $3 token): ShedLock knows only
// locked_by, so a token is dblock's row's owner of that token.
std::string named_holder(const Tables& t) {
  return "($2::text IS NULL OR locked_by = $2) AND ($3::bigint IS NULL OR locked_by = (SELECT owner FROM " + t.locks +
         " WHERE name = $1 AND token = $3::bigint AND strategy = 'shedlock'))";
}

Param selector_param(const std::optional<std::string>& v) { return v ? Param(*v) : Param(); }
Param selector_param(const std::optional<std::int64_t>& v) { return v ? Param(std::to_string(*v)) : Param(); }

}  // namespace

Result<std::int64_t> shedlock_renew(Connection& conn, const BackendOptions& options, const Tables& t,
                                    const std::string& key, const HolderSelector& who, Millis ttl) {
  if (!who.owner && !who.token) return fail(ErrorKind::usage, "renew needs the holder's owner or token");
  // ShedLock's extend, on the named holder.
  auto r = conn.exec("UPDATE " + shed_table(options) + " SET lock_until = " + std::string(now_utc) +
                         " + $4::bigint * interval '1 ms' WHERE name = $1 AND " + named_holder(t) +
                         " AND lock_until > " + std::string(now_utc) + " RETURNING " + ms("lock_until"),
                     {key, selector_param(who.owner), selector_param(who.token), ms_param(ttl)});
  if (!r) return std::unexpected(r.error());
  if (r->rows() == 0) return fail(ErrorKind::lost, "'" + key + "' is not held by " + rows::describe(who));
  return r->int64(0, 0);
}

Result<void> shedlock_release(Connection& conn, const BackendOptions& options, const Tables& t,
                              const std::string& key, const HolderSelector& who) {
  if (!who.force && !who.owner && !who.token)
    return fail(ErrorKind::usage, "release needs the holder's owner or token, or --force");
  const std::string shed = shed_table(options);
  // ShedLock's unlock with lockAtLeastFor 0 (--force also cuts a lockAtLeastFor short), then
  // dblock's row of that holder is marked released.
  auto r = conn.exec("WITH u AS (UPDATE " + shed + " SET lock_until = " + std::string(now_utc) +
                         " WHERE name = $1 AND ($4::boolean OR " + named_holder(t) + " AND lock_until > " +
                         std::string(now_utc) + ") RETURNING locked_by), m AS (UPDATE " + t.locks +
                         " SET released_at = now() WHERE name = $1 AND released_at IS NULL AND strategy = 'shedlock' "
                         "AND owner IN (SELECT locked_by FROM u)) SELECT count(*) FROM u",
                     {key, selector_param(who.owner), selector_param(who.token), who.force ? "true" : "false"});
  if (!r) return std::unexpected(r.error());
  if (r->int64(0, 0) == 0 && !who.force)
    return fail(ErrorKind::lost, "'" + key + "' is not held by " + rows::describe(who));
  return {};
}

}  // namespace dblock::postgres

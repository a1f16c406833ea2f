// --table-format shedlock on MariaDB/MySQL (common/shedlock.hpp): the lease is a row of
// ShedLock's table, taken, extended and unlocked with the statements of ShedLock's
// MySqlServerTimeStatementsSource (database time as UTC_TIMESTAMP(3); this session is in UTC,
// so the TIMESTAMP(3) columns hold UTC as ShedLock's own sessions in UTC write it). dblock's
// <prefix>locks row of the same name carries the fencing token, bumped right after each take,
// and <prefix>runs the history. ShedLock never reads dblock's tables.

#include <charconv>
#include <set>
#include <utility>

#include "backends/common/identifiers.hpp"
#include "backends/common/lock_rows.hpp"
#include "backends/common/shedlock.hpp"
#include "backends/mysql/mysql_error.hpp"
#include "backends/mysql/mysql_tables.hpp"

namespace dblock::mysql {
namespace {

// ShedLock's now and lockAtMostFor (bound in microseconds, as ShedLock binds it).
constexpr std::string_view now_utc = "UTC_TIMESTAMP(3)";
const std::string until = "TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(3))";

std::string shed_table(const BackendOptions& o) { return quote_identifier(o.shedlock_table, '`'); }

std::int64_t number(const Value& v) {
  std::int64_t out = 0;
  if (v) std::from_chars(v->data(), v->data() + v->size(), out);
  return out;
}

/// name, locked_by, locked_at, lock_until, database now (ms), then dblock's token and, when
/// dblock's row is this holder's, its host and pid.
std::string holder_select(const BackendOptions& o, const Tables& t) {
  return "SELECT s.name, s.locked_by, " + epoch_ms("s.locked_at") + ", " + epoch_ms("s.lock_until") + ", " +
         epoch_ms("UTC_TIMESTAMP(3)") + ", COALESCE(l.token, 0), IF(l.owner = s.locked_by, l.host, NULL), "
         "IF(l.owner = s.locked_by, l.pid, NULL) FROM " + shed_table(o) + " s LEFT JOIN " + t.locks +
         " l ON l.name = s.name";
}

LockStatus read_holder(const Row& r) {
  LockStatus s;
  s.key = r.at(0).value_or("");
  s.owner = r.at(1).value_or("");
  s.strategy = "shedlock";
  if (r.at(2)) s.acquired_at_ms = number(r.at(2));
  if (r.at(3)) s.expires_at_ms = number(r.at(3));
  s.db_now_ms = number(r.at(4));
  s.token = number(r.at(5));
  s.host = r.at(6).value_or("");
  s.pid = number(r.at(7));
  // lock_until in the future: held (also while lockAtLeastFor keeps a finished run's lock).
  s.state = s.expires_at_ms && *s.expires_at_ms > s.db_now_ms ? LockStatus::State::held : LockStatus::State::free;
  return s;
}

class ShedlockLocker final : public Locker {
 public:
  ShedlockLocker(std::unique_ptr<Connection> conn, const BackendOptions& options, Tables t)
      : conn_(std::move(conn)), options_(options), t_(std::move(t)), shed_(shed_table(options)) {}

  Result<AcquireOutcome> try_acquire(const LockRequest& req, Millis) override {
    if (auto ok = shedlock::check_name(req.key); !ok) return std::unexpected(ok.error());
    if (req.min_interval.count() > 0)
      return fail(ErrorKind::usage, "--min-interval needs dblock's own table: ShedLock's table keeps no last start");
    auto out = with_tables([&] { return attempt(req); });
    if (!out && out.error().kind == ErrorKind::connection) (void)conn_->reconnect();  // for core's next attempt
    return out;
  }

  Result<void> renew(Millis ttl) override {
    if (!held_) return fail(ErrorKind::lost, "no lease is held");
    // ShedLock's extend: only while this holder's lock_until is still ahead.
    const std::string sql = "UPDATE " + shed_ + " SET lock_until = " + until +
                            " WHERE name = ? AND locked_by = ? AND lock_until > " + std::string(now_utc);
    auto done = with_reconnect(*conn_, [&] { return conn_->execute(sql, {micros(ttl), held_->key, held_->owner}); });
    if (!done) return std::unexpected(done.error());
    if (done->affected_rows == 0)
      return fail(ErrorKind::lost, "the ShedLock lock '" + held_->key + "' is no longer held by " + held_->owner +
                                       ": its lock_until passed or another holder took it");
    return {};
  }

  Result<void> release(const ReleaseRequest& req) override {
    if (!held_) return fail(ErrorKind::lost, "no lease is held");
    // ShedLock's unlock: lock_until = GREATEST(now, locked_at + lockAtLeastFor), on name and locked_by.
    const std::string at_least = "TIMESTAMPADD(MICROSECOND, ?, locked_at)";
    const std::string unlock = "UPDATE " + shed_ + " SET lock_until = IF(" + at_least + " > " + std::string(now_utc) +
                               ", " + at_least + ", " + std::string(now_utc) + ") WHERE name = ? AND locked_by = ?";
    const std::int64_t min_hold = micros(req.min_hold);
    auto done = with_reconnect(*conn_, [&] { return conn_->execute(unlock, {min_hold, min_hold, held_->key, held_->owner}); });
    if (!done) return std::unexpected(done.error());
    const bool still_held = done->affected_rows != 0;
    Sql mark("UPDATE " + t_.locks + " SET released_at = NOW(6)");
    if (req.finished_run) mark.add(", last_finished_at = NOW(6), last_exit_code = ?", req.exit_code);
    mark.add(" WHERE name = ? AND token = ? AND released_at IS NULL", held_->key, held_->token);
    if (auto r = with_reconnect(*conn_, [&] { return conn_->execute(mark); }); !r) return std::unexpected(r.error());
    // The run happened even when the lock was lost meanwhile: its history row is still written.
    if (req.history)
      if (auto r = write_history(*conn_, t_, complete_run_record(*req.history, *held_, "lease", still_held),
                                 options_.history_keep);
          !r)
        return std::unexpected(r.error());
    const HeldLock held = std::move(*held_);
    held_.reset();
    if (!still_held)
      return fail(ErrorKind::lost, "the ShedLock lock '" + held.key + "' was no longer held by " + held.owner +
                                       " when it was released");
    return {};
  }

 private:
  // ShedLock's acquire (insert, or update where lock_until has passed), then the token of
  // dblock's row. Each statement commits on its own, as ShedLock's do: in one transaction the
  // shared lock INSERT IGNORE keeps on an existing row would deadlock two takers' UPDATEs.
  // The token is bumped after the take, before any command runs under it: a crash in between
  // only leaves that take without a token (and without a run).
  Result<AcquireOutcome> attempt(const LockRequest& req) {
    const std::int64_t ttl = micros(req.ttl);
    auto inserted = conn_->execute("INSERT IGNORE INTO " + shed_ + " (name, lock_until, locked_at, locked_by) VALUES (?, " +
                                       until + ", " + std::string(now_utc) + ", ?)",
                                   {req.key, ttl, req.owner});
    if (!inserted) return std::unexpected(inserted.error());
    if (inserted->affected_rows == 0) {
      auto updated = conn_->execute("UPDATE " + shed_ + " SET lock_until = " + until + ", locked_at = " +
                                        std::string(now_utc) + ", locked_by = ? WHERE name = ? AND lock_until <= " +
                                        std::string(now_utc),
                                    {ttl, req.owner, req.key});
      if (!updated) return std::unexpected(updated.error());
      if (updated->affected_rows == 0) return busy(req.key);
    }
    // The fencing token ShedLock lacks: dblock's row of the name (LAST_INSERT_ID carries the new token).
    auto numbered = conn_->execute(
        "INSERT INTO " + t_.locks +
            " (name, owner, host, pid, token, strategy, session_id, acquired_at, renewed_at, expires_at, released_at, "
            "last_started_at) VALUES (?, ?, ?, ?, 1, 'shedlock', NULL, NOW(6), NOW(6), NULL, NULL, NOW(6)) "
            "ON DUPLICATE KEY UPDATE owner = VALUES(owner), host = VALUES(host), pid = VALUES(pid), "
            "token = LAST_INSERT_ID(token + 1), strategy = 'shedlock', session_id = NULL, acquired_at = NOW(6), "
            "renewed_at = NOW(6), expires_at = NULL, released_at = NULL, last_started_at = NOW(6)",
        {req.key, req.owner, req.host, req.pid});
    if (!numbered) return std::unexpected(numbered.error());
    AcquireOutcome out;
    out.state = AcquireOutcome::State::acquired;
    out.token = numbered->affected_rows == 1 ? 1 : static_cast<std::int64_t>(numbered->insert_id);
    held_ = HeldLock{req.key, req.owner, req.host, req.pid, out.token};
    return out;
  }

  Result<AcquireOutcome> busy(const std::string& key) {
    AcquireOutcome out;
    auto r = conn_->execute(holder_select(options_, t_) + " WHERE s.name = ?", {key});
    if (!r) return std::unexpected(r.error());
    if (!r->rows.empty()) out.holder = read_holder(r->rows.front());
    return out;
  }

  /// The tables are assumed (backend.hpp, make_locker): on ER_NO_SUCH_TABLE dblock's and
  /// ShedLock's are made, ShedLock's only when missing, and the operation runs again; on
  /// ER_BAD_FIELD_ERROR the same checks name the missing column (ErrorKind::config).
  template <class Attempt>
  auto with_tables(Attempt&& attempt) -> decltype(attempt()) {
    auto first = attempt();
    if (first || (!is_no_such_table(first.error()) && !is_bad_field(first.error()))) return first;
    if (auto made = ensure_schema(*conn_, t_); !made) return std::unexpected(made.error());
    if (auto made = ensure_shedlock_table(*conn_, options_); !made) return std::unexpected(made.error());
    return attempt();
  }

  std::unique_ptr<Connection> conn_;
  BackendOptions options_;
  Tables t_;
  std::string shed_;
  std::optional<HeldLock> held_;
};

}  // namespace

Result<std::unique_ptr<Locker>> make_shedlock_locker(const Dsn& dsn, const BackendOptions& options, Tables t,
                                                     std::unique_ptr<Connection> conn) {
  if (!conn) {
    auto c = Connection::open(dsn, options);
    if (!c) return std::unexpected(c.error());
    conn = std::move(*c);
  }
  return std::unique_ptr<Locker>(std::make_unique<ShedlockLocker>(std::move(conn), options, std::move(t)));
}

Result<void> ensure_shedlock_table(Connection& conn, const BackendOptions& options) {
  if (auto ok = conn.query(shedlock::ddl("mysql", shed_table(options))); !ok) return ok;
  auto cols = conn.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() "
                           "AND table_name = ?",
                           {options.shedlock_table});
  if (!cols) return std::unexpected(cols.error());
  std::set<std::string> have;
  for (const auto& row : cols->rows) have.insert(row.at(0).value_or(""));
  for (std::string_view column : shedlock::columns)
    if (!have.contains(std::string(column)))
      return fail(ErrorKind::config, "table " + options.shedlock_table + " is not a ShedLock table: column " +
                                         std::string(column) + " is missing");
  return {};
}

Result<std::vector<LockStatus>> shedlock_status(Connection& conn, const BackendOptions& options, const Tables& t,
                                                std::span<const std::string> keys) {
  Sql sql(holder_select(options, t));
  if (!keys.empty()) {
    sql.add(" WHERE s.name IN (");
    for (std::size_t i = 0; i < keys.size(); ++i) sql.add(i ? ", ?" : "?", keys[i]);
    sql.add(")");
  }
  sql.add(" ORDER BY s.name");
  auto result = conn.execute(sql);
  if (!result) return std::unexpected(result.error());
  std::vector<LockStatus> found;
  for (const auto& row : result->rows) found.push_back(read_holder(row));
  return rows::in_request_order(std::move(found), keys, [&conn]() -> Result<std::int64_t> {
    auto r = conn.execute("SELECT " + epoch_ms("UTC_TIMESTAMP(3)"));
    if (!r) return std::unexpected(r.error());
    return number(r->rows.at(0).at(0));
  });
}

}  // namespace dblock::mysql

namespace dblock::mysql {
namespace {

// The holder a stateless renew/release names: ShedLock knows only locked_by, so a token is
// dblock's row's owner of that token.
Sql named_holder(const Tables& t, const std::string& key, const HolderSelector& who) {
  return Sql("(? IS NULL OR locked_by = ?) AND (? IS NULL OR locked_by = (SELECT owner FROM " + t.locks +
                 " WHERE name = ? AND token = ? AND strategy = 'shedlock'))",
             who.owner, who.owner, who.token, key, who.token);
}

}  // namespace

Result<std::int64_t> shedlock_renew(Connection& conn, const BackendOptions& options, const Tables& t,
                                    const std::string& key, const HolderSelector& who, Millis ttl) {
  if (!who.owner && !who.token) return fail(ErrorKind::usage, "renew needs the holder's owner or token");
  const std::string shed = shed_table(options);
  // ShedLock's extend, on the named holder.
  Sql extend("UPDATE " + shed + " SET lock_until = " + until + " WHERE name = ? AND ", micros(ttl), key);
  extend.add(named_holder(t, key, who)).add(" AND lock_until > " + std::string(now_utc));
  auto done = conn.execute(extend);
  if (!done) return std::unexpected(done.error());
  if (done->affected_rows == 0) return fail(ErrorKind::lost, "'" + key + "' is not held by " + rows::describe(who));
  auto r = conn.execute("SELECT " + epoch_ms("lock_until") + " FROM " + shed + " WHERE name = ?", {key});
  if (!r) return std::unexpected(r.error());
  return r->rows.empty() ? 0 : number(r->rows.front().at(0));
}

Result<void> shedlock_release(Connection& conn, const BackendOptions& options, const Tables& t,
                              const std::string& key, const HolderSelector& who) {
  if (!who.force && !who.owner && !who.token)
    return fail(ErrorKind::usage, "release needs the holder's owner or token, or --force");
  const std::string shed = shed_table(options);
  Sql find("SELECT locked_by FROM " + shed + " WHERE name = ? AND (? OR ", key, who.force);
  find.add(named_holder(t, key, who)).add(" AND lock_until > " + std::string(now_utc) + ")");
  auto found = conn.execute(find);
  if (!found) return std::unexpected(found.error());
  if (found->rows.empty()) {
    if (who.force) return {};
    return fail(ErrorKind::lost, "'" + key + "' is not held by " + rows::describe(who));
  }
  const std::string holder = found->rows.front().at(0).value_or("");
  // ShedLock's unlock with lockAtLeastFor 0 (--force also cuts a lockAtLeastFor short), then
  // dblock's row of that holder is marked released.
  auto done = conn.execute("UPDATE " + shed + " SET lock_until = " + std::string(now_utc) +
                               " WHERE name = ? AND locked_by = ?",
                           {key, holder});
  if (!done) return std::unexpected(done.error());
  auto marked = conn.execute("UPDATE " + t.locks + " SET released_at = NOW(6) WHERE name = ? AND owner = ? AND "
                             "released_at IS NULL AND strategy = 'shedlock'",
                             {key, holder});
  if (!marked) return std::unexpected(marked.error());
  return {};
}

}  // namespace dblock::mysql

// --table-format shedlock on SQLite (common/shedlock.hpp): the lease is a row of ShedLock's
// table, taken, extended and unlocked with the statements of ShedLock's JDBC provider in
// database time; dblock's own <prefix>locks row of the same name carries the fencing token
// (bumped in the same transaction) and <prefix>runs the history. ShedLock never reads them.
// Times are UTC text 'YYYY-MM-DD HH:MM:SS.SSS', so they compare as text; SQLite has no server
// clock, so unlike dblock's own lease this one is judged on the wall clock, as the Java side would.

#include <utility>

#include "backends/common/shedlock.hpp"
#include "backends/sqlite/sqlite_tables.hpp"

namespace dblock::sqlite {
namespace {

/// SQL: `ts` (a stored timestamp expression) plus a bound millisecond parameter, as a stored timestamp.
std::string plus_ms_sql(const std::string& ts, const std::string& ms_param) {
  return "strftime('%Y-%m-%d %H:%M:%f', julianday(" + ts + ") + " + ms_param + " / 86400000.0)";
}

/// Names of both tables, quoted.
struct ShedTables : Tables {
  explicit ShedTables(const BackendOptions& o) : Tables(o.table_prefix), shed(quote_ident(o.shedlock_table)) {}
  std::string shed;
};

/// SELECT of status and of a busy answer: name, locked_by, locked_at, lock_until, database now
/// (ms), the token and holder fields of dblock's row when it is this holder's.
std::string holder_select(const ShedTables& t) {
  return "SELECT s.name, s.locked_by, " + epoch_ms_sql("s.locked_at") + ", " + epoch_ms_sql("s.lock_until") + ", " +
         now_ms_sql() + ", COALESCE(l.token, 0), CASE WHEN l.owner = s.locked_by THEN l.host END, CASE WHEN l.owner = "
         "s.locked_by THEN l.pid END FROM " + t.shed + " s LEFT JOIN " + t.locks + " l ON l.name = s.name";
}

LockStatus read_holder(const Statement& row) {
  LockStatus s;
  s.key = row.text(0);
  s.owner = row.text(1);
  s.strategy = "shedlock";
  s.acquired_at_ms = row.opt_int64(2);
  s.expires_at_ms = row.opt_int64(3);
  s.db_now_ms = row.int64(4);
  s.token = row.int64(5);
  s.host = row.text(6);
  s.pid = row.opt_int64(7).value_or(0);
  // lock_until in the future: held (also while lockAtLeastFor keeps a finished run's lock).
  s.state = s.expires_at_ms && *s.expires_at_ms > s.db_now_ms ? LockStatus::State::held : LockStatus::State::free;
  return s;
}

class ShedlockLocker final : public Locker {
 public:
  ShedlockLocker(std::shared_ptr<const Connection> conn, const BackendOptions& options)
      : conn_(std::move(conn)), options_(options), t_(options) {}

  Result<AcquireOutcome> try_acquire(const LockRequest& req, Millis) override {
    if (auto ok = shedlock::check_name(req.key); !ok) return std::unexpected(ok.error());
    if (req.min_interval.count() > 0)
      return fail(ErrorKind::usage, "--min-interval needs dblock's own table: ShedLock's table keeps no last start");
    return with_tables([&] { return attempt_acquire(req); });
  }

  Result<void> renew(Millis ttl) override {
    if (!held_ || lost_) return fail(ErrorKind::lost, "no lock is held, so there is nothing to renew");
    // ShedLock's extend: only while this holder's lock_until is still ahead.
    auto stmt = conn_->prepare("UPDATE " + t_.shed + " SET lock_until = " + now_plus_sql("?3") +
                               " WHERE name = ?1 AND locked_by = ?2 AND lock_until > " + now_sql() + " RETURNING 1");
    if (!stmt) return std::unexpected(stmt.error());
    stmt->bind(1, std::string_view(held_->key));
    stmt->bind(2, std::string_view(held_->owner));
    stmt->bind(3, static_cast<std::int64_t>(ttl.count()));
    auto row = stmt->step("renewing " + held_->key);
    if (!row) return std::unexpected(row.error());
    if (!*row) {
      lost_ = true;  // held_ stays: release() still writes the history row
      return fail(ErrorKind::lost, "the ShedLock lock " + held_->key + " is no longer held by " + held_->owner +
                                       ": its lock_until passed or another holder took it");
    }
    return stmt->run("renewing " + held_->key);
  }

  Result<void> release(const ReleaseRequest& req) override {
    if (!held_) return fail(ErrorKind::lost, "no lock is held, so there is nothing to release");
    const Held held = *held_;
    auto tx = Transaction::begin_immediate(*conn_, "releasing " + held.key);
    if (!tx) return std::unexpected(tx.error());
    // ShedLock's unlock: lock_until = GREATEST(now, locked_at + lockAtLeastFor), on name and locked_by.
    const std::string at_least = plus_ms_sql("locked_at", "?3");
    auto unlock = conn_->prepare("UPDATE " + t_.shed + " SET lock_until = CASE WHEN " + at_least + " > " + now_sql() +
                                 " THEN " + at_least + " ELSE " + now_sql() + " END WHERE name = ?1 AND locked_by = ?2" +
                                 " RETURNING 1");
    if (!unlock) return std::unexpected(unlock.error());
    unlock->bind(1, std::string_view(held.key));
    unlock->bind(2, std::string_view(held.owner));
    unlock->bind(3, static_cast<std::int64_t>(req.min_hold.count()));
    bool released = false;
    if (!lost_) {
      auto row = unlock->step("releasing " + held.key);
      if (!row) return std::unexpected(row.error());
      released = *row;
      if (auto done = unlock->run("releasing " + held.key); !done) return done;
    }
    // dblock's row of the token: released, with the run's end.
    auto mark = conn_->prepare("UPDATE " + t_.locks + " SET released_at = " + now_sql() +
                               ", last_finished_at = CASE WHEN ?3 THEN " + now_sql() +
                               " ELSE last_finished_at END, last_exit_code = CASE WHEN ?3 THEN ?4 ELSE last_exit_code END"
                               " WHERE name = ?1 AND token = ?2 AND released_at IS NULL");
    if (!mark) return std::unexpected(mark.error());
    mark->bind(1, std::string_view(held.key));
    mark->bind(2, held.token);
    mark->bind(3, static_cast<std::int64_t>(req.finished_run ? 1 : 0));
    if (req.exit_code) mark->bind(4, static_cast<std::int64_t>(*req.exit_code));
    else mark->bind_null(4);
    if (auto ok = mark->run("releasing " + held.key); !ok) return ok;
    if (req.history) {
      RunRecord run = complete_run_record(*req.history, held, "lease", released);
      if (auto ok = record_run(*conn_, t_, options_.history_keep, run, held.acquired_at); !ok) return ok;
    }
    if (auto ok = tx->commit("committing the release of " + held.key); !ok) return ok;
    held_.reset();
    lost_ = false;
    if (!released)
      return fail(ErrorKind::lost, "the ShedLock lock " + held.key + " was no longer held by " + held.owner +
                                       " when it was released");
    return {};
  }

 private:
  struct Held : HeldLock {
    std::string acquired_at;  // dblock's row, as stored, for the history row's started_at
  };

  /// The tables are assumed (backend.hpp, make_locker); SQLite reports a missing one as plain
  /// SQLITE_ERROR, so on that code they are made (ShedLock's only when missing) and the
  /// operation runs once more.
  template <class Attempt>
  auto with_tables(Attempt attempt) -> decltype(attempt()) {
    auto first = attempt();
    if (first || (first.error().native_code & 0xff) != SQLITE_ERROR) return first;
    if (auto ok = sqlite::ensure_schema(*conn_, options_.table_prefix); !ok) return std::unexpected(ok.error());
    if (auto ok = ensure_shedlock_table(*conn_, options_); !ok) return std::unexpected(ok.error());
    return attempt();
  }

  Result<AcquireOutcome> attempt_acquire(const LockRequest& req) {
    if (held_) return fail(ErrorKind::internal, "this locker already holds " + held_->key);
    auto tx = Transaction::begin_immediate(*conn_, "acquiring " + req.key);
    if (!tx) return std::unexpected(tx.error());
    // ShedLock's acquire: insert, or take over a row whose lock_until has passed.
    auto take = conn_->prepare("INSERT INTO " + t_.shed + " AS s (name, lock_until, locked_at, locked_by) VALUES (?1, " +
                               now_plus_sql("?3") + ", " + now_sql() +
                               ", ?2) ON CONFLICT(name) DO UPDATE SET lock_until = excluded.lock_until,"
                               " locked_at = excluded.locked_at, locked_by = excluded.locked_by WHERE s.lock_until <= " +
                               now_sql() + " RETURNING " + epoch_ms_sql("lock_until"));
    if (!take) return std::unexpected(take.error());
    take->bind(1, std::string_view(req.key));
    take->bind(2, std::string_view(req.owner));
    take->bind(3, static_cast<std::int64_t>(req.ttl.count()));
    auto taken = take->step("acquiring " + req.key);
    if (!taken) return std::unexpected(taken.error());
    AcquireOutcome out;
    if (!*taken) return busy(req.key);  // the transaction changed nothing; its guard rolls it back
    out.expires_at_ms = take->opt_int64(0);
    if (auto done = take->run("acquiring " + req.key); !done) return std::unexpected(done.error());

    // The fencing token ShedLock lacks: dblock's row of the name, bumped in the same transaction.
    auto token = conn_->prepare(
        "INSERT INTO " + t_.locks +
        " AS l (name, owner, host, pid, token, strategy, acquired_at, renewed_at, released_at, last_started_at)"
        " VALUES (?1, ?2, ?3, ?4, 1, 'shedlock', " + now_sql() + ", " + now_sql() + ", NULL, " + now_sql() +
        ") ON CONFLICT(name) DO UPDATE SET owner = excluded.owner, host = excluded.host, pid = excluded.pid,"
        " token = l.token + 1, strategy = 'shedlock', session_id = NULL, acquired_at = excluded.acquired_at,"
        " renewed_at = excluded.renewed_at, expires_at = NULL, released_at = NULL,"
        " last_started_at = excluded.last_started_at RETURNING token, " + epoch_ms_sql("acquired_at") + ", acquired_at");
    if (!token) return std::unexpected(token.error());
    token->bind(1, std::string_view(req.key));
    token->bind(2, std::string_view(req.owner));
    token->bind(3, std::string_view(req.host));
    token->bind(4, req.pid);
    auto row = token->step("numbering the lock of " + req.key);
    if (!row) return std::unexpected(row.error());
    if (!*row) return fail(ErrorKind::internal, "no token row for " + req.key);
    out.state = AcquireOutcome::State::acquired;
    out.token = token->int64(0);
    out.acquired_at_ms = token->opt_int64(1);
    Held held{{req.key, req.owner, req.host, req.pid, out.token}, token->text(2)};
    if (auto done = token->run("numbering the lock of " + req.key); !done) return std::unexpected(done.error());
    if (auto ok = tx->commit("committing the acquisition of " + req.key); !ok) return std::unexpected(ok.error());
    held_ = std::move(held);
    return out;
  }

  Result<AcquireOutcome> busy(const std::string& key) {
    AcquireOutcome out;
    auto read = conn_->prepare(holder_select(t_) + " WHERE s.name = ?1");
    if (!read) return std::unexpected(read.error());
    read->bind(1, std::string_view(key));
    auto found = read->step("reading the holder of " + key);
    if (!found) return std::unexpected(found.error());
    if (*found) out.holder = read_holder(*read);
    return out;
  }

  std::shared_ptr<const Connection> conn_;
  BackendOptions options_;
  ShedTables t_;
  std::optional<Held> held_;
  bool lost_ = false;  // renew() found the lock gone; held_ stays for the history row
};

}  // namespace

std::unique_ptr<Locker> make_shedlock_locker(std::shared_ptr<const Connection> conn, const BackendOptions& options) {
  return std::make_unique<ShedlockLocker>(std::move(conn), options);
}

Result<void> ensure_shedlock_table(const Connection& conn, const BackendOptions& options) {
  const ShedTables t(options);
  if (auto ok = conn.exec(shedlock::ddl("sqlite", t.shed), "creating table " + options.shedlock_table); !ok) return ok;
  auto stmt = conn.prepare("SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2");
  if (!stmt) return std::unexpected(stmt.error());
  for (std::string_view column : shedlock::columns) {
    stmt->reset();
    stmt->bind(1, std::string_view(options.shedlock_table));
    stmt->bind(2, column);
    auto row = stmt->step("reading the shape of table " + options.shedlock_table);
    if (!row) return std::unexpected(row.error());
    if (!*row)
      return fail(ErrorKind::config, "table " + options.shedlock_table + " in " + conn.path() +
                                         " is not a ShedLock table: column " + std::string(column) + " is missing");
  }
  return {};
}

std::string shedlock_status_select(const BackendOptions& options) {
  return "SELECT * FROM (" + holder_select(ShedTables(options)) + ")";
}

LockStatus read_shedlock_status(const Statement& row) { return read_holder(row); }

}  // namespace dblock::sqlite

namespace dblock::sqlite {
namespace {

// The holder a stateless renew/release names (?2 owner, ?3 token): ShedLock knows only
// locked_by, so a token is dblock's row's owner of that token.
std::string named_holder(const ShedTables& t) {
  return "(?2 IS NULL OR locked_by = ?2) AND (?3 IS NULL OR locked_by = (SELECT owner FROM " + t.locks +
         " WHERE name = ?1 AND token = ?3 AND strategy = 'shedlock'))";
}

}  // namespace

std::string shedlock_renew_sql(const BackendOptions& options) {
  const ShedTables t(options);
  // ShedLock's extend, on the named holder.
  return "UPDATE " + t.shed + " SET lock_until = " + now_plus_sql("?4") + " WHERE name = ?1 AND " + named_holder(t) +
         " AND lock_until > " + now_sql() + " RETURNING " + epoch_ms_sql("lock_until");
}

Result<void> shedlock_release(const Connection& conn, const BackendOptions& options, const std::string& key,
                              const HolderSelector& who) {
  if (!who.force && !who.owner && !who.token)
    return fail(ErrorKind::usage, "release needs the holder's owner or token, or --force");
  const ShedTables t(options);
  auto tx = Transaction::begin_immediate(conn, "releasing " + key);
  if (!tx) return std::unexpected(tx.error());
  // ShedLock's unlock with lockAtLeastFor 0 (--force also cuts a lockAtLeastFor short), then
  // dblock's row of that holder is marked released.
  auto unlock = conn.prepare("UPDATE " + t.shed + " SET lock_until = " + now_sql() + " WHERE name = ?1 AND (?4 OR " +
                             named_holder(t) + " AND lock_until > " + now_sql() + ") RETURNING locked_by");
  if (!unlock) return std::unexpected(unlock.error());
  unlock->bind(1, std::string_view(key));
  unlock->bind(2, who.owner);
  unlock->bind(3, who.token);
  unlock->bind(4, static_cast<std::int64_t>(who.force ? 1 : 0));
  auto row = unlock->step("releasing " + key);
  if (!row) return std::unexpected(row.error());
  if (!*row) {
    if (who.force) return {};
    return fail(ErrorKind::lost, "the lock " + key + " is not held by " + rows::describe(who));
  }
  const std::string holder = unlock->text(0);
  if (auto done = unlock->run("releasing " + key); !done) return done;
  auto mark = conn.prepare("UPDATE " + t.locks + " SET released_at = " + now_sql() +
                           " WHERE name = ?1 AND owner = ?2 AND released_at IS NULL AND strategy = 'shedlock'");
  if (!mark) return std::unexpected(mark.error());
  mark->bind(1, std::string_view(key));
  mark->bind(2, std::string_view(holder));
  if (auto done = mark->run("releasing " + key); !done) return done;
  return tx->commit("committing the release of " + key);
}

}  // namespace dblock::sqlite

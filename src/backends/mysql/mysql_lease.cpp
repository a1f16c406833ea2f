// The lease strategy: a row per key taken by one conditional upsert, renewed by heartbeat,
// released by an owner- and token-checked update. Lease acquire, renew and release are one
// statement each; a repeated statement is executed from the connection's statement cache, so
// it is one round trip (the first one too on MariaDB: prepare and execute go together).
#include <mutex>

#include "backends/mysql/mysql_tables.hpp"

namespace dblock::mysql {
namespace {

// The row is free when its lease ended (or a session strategy left expires_at NULL) and,
// with --min-interval, the last start is old enough. Binds: min_interval_us twice.
constexpr const char* free_condition =
    "((expires_at IS NULL OR expires_at <= NOW(6)) AND "
    "(? = 0 OR last_started_at IS NULL OR last_started_at <= NOW(6) - INTERVAL ? MICROSECOND))";
constexpr const char* due_condition =
    "(? = 0 OR last_started_at IS NULL OR last_started_at <= NOW(6) - INTERVAL ? MICROSECOND)";

// One statement: insert the row, or take it over only when free. MySQL evaluates the update
// list left to right, each assignment seeing the columns already assigned, so every column
// the condition reads (expires_at, last_started_at) is assigned last. The last one cannot
// re-test the condition on the new expires_at; it recognises this statement's own takeover
// (acquired_at and expires_at just set) instead, and also tests the old values, which makes
// it right under MariaDB's SIMULTANEOUS_ASSIGNMENT mode too. (A row someone else took in the
// very same microsecond with the same TTL already has last_started_at = NOW(6).)
// The new token comes back through LAST_INSERT_ID(expr) as mysql_insert_id(), and affected
// rows say what happened (1 inserted, 2 taken over, 0 left alone): no second statement.
std::string acquire_sql(const Tables& t) {
  const std::string c = free_condition;
  auto assign = [&](const std::string& column, const std::string& value) {
    return column + " = IF(" + c + ", " + value + ", " + column + "), ";
  };
  return "INSERT INTO " + t.locks +
         " (name, owner, host, pid, token, strategy, session_id, acquired_at, renewed_at, expires_at, released_at, "
         "last_started_at) VALUES (?, ?, ?, ?, 1, 'lease', NULL, NOW(6), NOW(6), NOW(6) + INTERVAL ? MICROSECOND, "
         "NULL, NOW(6)) ON DUPLICATE KEY UPDATE " +
         assign("owner", "VALUES(owner)") + assign("host", "VALUES(host)") + assign("pid", "VALUES(pid)") +
         assign("strategy", "'lease'") + assign("session_id", "NULL") + assign("acquired_at", "NOW(6)") +
         assign("renewed_at", "NOW(6)") + assign("released_at", "NULL") +
         assign("token", "LAST_INSERT_ID(token + 1)") + assign("expires_at", "VALUES(expires_at)") +
         "last_started_at = IF(" + due_condition + " AND ((expires_at IS NULL OR expires_at <= NOW(6)) OR "
         "(acquired_at <=> NOW(6) AND expires_at <=> VALUES(expires_at))), NOW(6), last_started_at)";
}

class LeaseLocker final : public Locker {
 public:
  LeaseLocker(std::unique_ptr<Connection> conn, Tables t, int keep)
      : conn_(std::move(conn)), t_(std::move(t)), keep_(keep), acquire_sql_(acquire_sql(t_)) {}

  Result<AcquireOutcome> try_acquire(const LockRequest& req, Millis) override {
    std::lock_guard lock(mutex_);
    const std::int64_t mi = micros(req.min_interval);
    std::vector<Param> params{std::string_view(req.key), std::string_view(req.owner), std::string_view(req.host),
                              req.pid, micros(req.ttl)};
    for (int i = 0; i < 10; ++i) {
      params.emplace_back(mi);
      params.emplace_back(mi);
    }
    params.emplace_back(mi);
    params.emplace_back(mi);
    // No retry here: had the lost reply carried our takeover, a retry would report busy on
    // our own row. Reconnect for the next attempt, which core schedules.
    auto done = conn_->execute(acquire_sql_, params);
    if (!done) {
      if (done.error().kind == ErrorKind::connection) (void)conn_->reconnect();
      return std::unexpected(done.error());
    }

    AcquireOutcome out;
    if (done->affected_rows == 1 || done->affected_rows == 2) {
      out.state = AcquireOutcome::State::acquired;
      out.token = done->affected_rows == 1 ? 1 : static_cast<std::int64_t>(done->insert_id);
      held_ = Held{req.key, req.owner, req.host, req.pid, out.token};
      return out;
    }
    // Cold path: tell who holds it, or when it is due.
    auto row = read_lock(*conn_, t_, req.key);
    if (!row) return std::unexpected(row.error());
    if (*row && (*row)->state == LockStatus::State::held && (*row)->strategy == "lease") {
      out.state = AcquireOutcome::State::busy;
      out.holder = **row;
      return out;
    }
    auto due = due_in(*conn_, t_, req.key, req.min_interval);
    if (!due) return std::unexpected(due.error());
    out.state = *due > Millis(0) ? AcquireOutcome::State::not_due : AcquireOutcome::State::busy;
    if (out.state == AcquireOutcome::State::not_due) out.due_in = *due;
    if (*row) out.holder = **row;
    return out;
  }

  Result<void> renew(Millis ttl) override {
    std::lock_guard lock(mutex_);
    if (!held_) return fail(ErrorKind::lost, "no lease is held");
    auto done = with_reconnect([&] {
      return conn_->execute("UPDATE " + t_.locks +
                                " SET renewed_at = NOW(6), expires_at = NOW(6) + INTERVAL ? MICROSECOND "
                                "WHERE name = ? AND owner = ? AND token = ? AND released_at IS NULL",
                            {micros(ttl), std::string_view(held_->key), std::string_view(held_->owner), held_->token});
    });
    if (!done) return std::unexpected(done.error());
    if (done->affected_rows == 0) return lost();
    return {};
  }

  Result<void> release(const ReleaseRequest& req) override {
    std::lock_guard lock(mutex_);
    if (!held_) return fail(ErrorKind::lost, "no lease is held");
    const Held held = *held_;
    held_.reset();
    std::string sql = "UPDATE " + t_.locks +
                      " SET released_at = NOW(6), expires_at = GREATEST(NOW(6), acquired_at + INTERVAL ? MICROSECOND)";
    std::vector<Param> params{micros(req.min_hold)};
    if (req.finished_run) {
      sql += ", last_finished_at = NOW(6), last_exit_code = ?";
      params.push_back(req.exit_code ? Param(std::int64_t{*req.exit_code}) : Param(nullptr));
    }
    sql += " WHERE name = ? AND owner = ? AND token = ? AND released_at IS NULL";
    params.insert(params.end(), {std::string_view(held.key), std::string_view(held.owner), held.token});
    auto done = with_reconnect([&] { return conn_->execute(sql, params); });
    if (!done) return std::unexpected(done.error());
    if (req.history)
      if (auto r = write_history(*conn_, t_, completed(*req.history, held, done->affected_rows != 0), keep_); !r) return r;
    if (done->affected_rows == 0) {
      held_ = held;
      auto r = lost();
      held_.reset();
      return r;
    }
    return {};
  }

 private:
  using Held = HeldLock;

  static RunRecord completed(RunRecord run, const Held& held, bool still_held) {
    return complete_run_record(std::move(run), held, "lease", still_held);
  }

  // A lease survives a short outage: reconnect once and repeat the statement, which is safe
  // because every lease statement is compared on owner and token (dblock(1), STRATEGIES).
  template <class F>
  auto with_reconnect(F&& statement) -> decltype(statement()) {
    auto first = statement();
    if (first || first.error().kind != ErrorKind::connection) return first;
    if (auto r = conn_->reconnect(); !r) return std::unexpected(r.error());
    return statement();
  }

  std::unexpected<Error> lost() const {
    return fail(ErrorKind::lost, "lease on '" + held_->key + "' (token " + std::to_string(held_->token) +
                                     ") is no longer held by " + held_->owner + ": it expired and was taken, or was released");
  }

  std::mutex mutex_;
  std::unique_ptr<Connection> conn_;
  Tables t_;
  int keep_;
  std::string acquire_sql_;
  std::optional<Held> held_;
};

}  // namespace

Result<std::unique_ptr<Locker>> make_lease_locker(const Dsn& dsn, const BackendOptions& options, Tables t) {
  auto conn = Connection::open(dsn, options);
  if (!conn) return std::unexpected(conn.error());
  return std::unique_ptr<Locker>(std::make_unique<LeaseLocker>(std::move(*conn), std::move(t), options.history_keep));
}

}  // namespace dblock::mysql

// The lease strategy: one conditional upsert acquires, one owner- and token-checked update
// renews or releases (and wakes waiters through NOTIFY in the same statement).
#include "backends/postgres/postgres_tables.hpp"

namespace dblock::postgres {
namespace {

class LeaseLocker final : public Locker {
 public:
  LeaseLocker(std::shared_ptr<Connection> conn, Tables t, int keep)
      : conn_(std::move(conn)), t_(std::move(t)), keep_(keep) {
    // Fresh row: token 1. Existing row: taken only when the lease is over (and, with
    // --min-interval, the last start is old enough); every taking bumps the token.
    acquire_sql_ =
        "INSERT INTO " + t_.locks + " AS l (name, owner, host, pid, token, strategy, session_id, acquired_at, "
        "renewed_at, expires_at, released_at, last_started_at) "
        "VALUES ($1, $2, $3, $4::bigint, 1, 'lease', NULL, now(), now(), now() + $5::bigint * interval '1 ms', NULL, now()) "
        "ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, host = EXCLUDED.host, pid = EXCLUDED.pid, "
        "token = l.token + 1, strategy = 'lease', session_id = NULL, acquired_at = now(), renewed_at = now(), "
        "expires_at = EXCLUDED.expires_at, released_at = NULL, last_started_at = now() "
        "WHERE (l.expires_at IS NULL OR l.expires_at <= now()) "
        "AND ($6::bigint = 0 OR l.last_started_at IS NULL OR l.last_started_at <= now() - $6::bigint * interval '1 ms') "
        "RETURNING token, " + ms("acquired_at") + ", " + ms("expires_at");
    // Cold path only: why did the upsert not take the row?
    inspect_sql_ = status_select(t_, "GREATEST(0, " + ms("last_started_at + $3::bigint * interval '1 ms'") + " - " +
                                         ms("now()") + ")") +
                   " WHERE name = $2";
    renew_sql_ = "UPDATE " + t_.locks +
                 " SET expires_at = now() + $4::bigint * interval '1 ms', renewed_at = now() "
                 "WHERE name = $1 AND owner = $2 AND token = $3::bigint AND released_at IS NULL RETURNING " +
                 ms("expires_at");
    // timestamptz(3) rounds to the nearest ms: a plain now() could be stored up to 0.5 ms in
    // the future and a status read right after the release would still say held.
    release_sql_ = "WITH u AS (UPDATE " + t_.locks +
                   " SET released_at = now(), expires_at = GREATEST(date_trunc('milliseconds', now()), acquired_at + $4::bigint * interval '1 ms'), "
                   "last_finished_at = CASE WHEN $5::boolean THEN now() ELSE last_finished_at END, "
                   "last_exit_code = CASE WHEN $5::boolean THEN $6::int ELSE last_exit_code END "
                   "WHERE name = $1 AND owner = $2 AND token = $3::bigint AND released_at IS NULL RETURNING name) "
                   "SELECT pg_notify($7, u.name)::text FROM u";
  }

  Result<AcquireOutcome> try_acquire(const LockRequest& req, Millis) override {
    if (!conn_->is_open())
      if (auto ok = conn_->reconnect(); !ok) return std::unexpected(ok.error());
    auto r = conn_->exec(acquire_sql_, {req.key, req.owner, req.host, std::to_string(req.pid), ms_param(req.ttl),
                                        ms_param(req.min_interval)});
    if (!r) return std::unexpected(r.error());
    AcquireOutcome out;
    if (r->rows() == 1) {
      out.state = AcquireOutcome::State::acquired;
      out.token = r->int64(0, 0);
      out.acquired_at_ms = r->opt_int64(0, 1);
      out.expires_at_ms = r->opt_int64(0, 2);
      key_ = req.key;
      owner_ = req.owner;
      held_req_ = req;
      token_ = out.token;
      // A holder needs no wake-ups, and while its command runs nobody would read them: stop
      // listening (best effort: what still arrives is dropped by every statement, renew's too).
      (void)conn_->unlisten();
      return out;
    }
    // A waiter hears this key's releases at once (core polls wakeup_fd()).
    if (auto ok = conn_->listen(release_channel(t_.prefix, req.key)); !ok) return std::unexpected(ok.error());
    auto row = conn_->exec(inspect_sql_, {t_.claims, req.key, ms_param(req.min_interval)});
    if (!row) return std::unexpected(row.error());
    out.state = AcquireOutcome::State::busy;
    if (row->rows() == 0) return out;  // vanished in between: busy, core simply retries
    out.holder = read_status(*row, 0, t_);
    if (out.holder->state != LockStatus::State::held && req.min_interval.count() > 0 && !row->is_null(0, status_columns)) {
      out.state = AcquireOutcome::State::not_due;
      out.due_in = Millis(row->int64(0, status_columns));
    }
    return out;
  }

  Result<void> renew(Millis ttl) override {
    if (!token_) return fail(ErrorKind::internal, "renew without a held lease");
    Params p{key_, owner_, std::to_string(*token_), ms_param(ttl)};
    auto r = conn_->is_open() ? conn_->exec(renew_sql_, p) : fail(ErrorKind::connection, "not connected");
    if (!r && r.error().kind == ErrorKind::connection) {
      // A lease survives a short outage: reconnect once and renew compared on our token.
      if (auto ok = conn_->reconnect(); !ok) return std::unexpected(ok.error());
      r = conn_->exec(renew_sql_, p);
    }
    if (!r) return std::unexpected(r.error());
    if (r->rows() == 0)
      return fail(ErrorKind::lost, "lease on '" + key_ + "' (token " + std::to_string(*token_) +
                                       ") was taken over or released by someone else");
    return {};
  }

  Result<void> release(const ReleaseRequest& req) override {
    if (!token_) return fail(ErrorKind::internal, "release without a held lease");
    Params p{key_,
             owner_,
             std::to_string(*token_),
             ms_param(req.min_hold),
             req.finished_run ? "true" : "false",
             req.exit_code ? Param(std::to_string(*req.exit_code)) : Param(),
             release_channel(t_.prefix, key_)};
    if (!conn_->is_open())
      if (auto ok = conn_->reconnect(); !ok) return std::unexpected(ok.error());
    auto r = conn_->exec(release_sql_, p);
    if (!r) return std::unexpected(r.error());
    const bool ours = r->rows() == 1;
    const std::int64_t token = *token_;
    token_.reset();
    // The run happened even when the lease was lost meanwhile: its history row is still written.
    if (req.history)
      if (auto h = insert_history(*conn_, t_, complete_run(*req.history, held_req_, token, Strategy::lease, ours), keep_); !h) return h;
    if (!ours) return fail(ErrorKind::lost, "lease on '" + key_ + "' was no longer ours at release");
    return {};
  }

  int wakeup_fd() const override { return conn_->socket(); }
  void consume_wakeup() override { conn_->drain_notifications(); }

 private:
  std::shared_ptr<Connection> conn_;
  Tables t_;
  int keep_;
  std::string acquire_sql_, inspect_sql_, renew_sql_, release_sql_;
  std::string key_, owner_;
  std::optional<std::int64_t> token_;
  LockRequest held_req_;
};

}  // namespace

std::unique_ptr<Locker> make_lease_locker(std::shared_ptr<Connection> conn, Tables t, int history_keep) {
  return std::make_unique<LeaseLocker>(std::move(conn), std::move(t), history_keep);
}

}  // namespace dblock::postgres

// The lease strategy: one conditional upsert acquires, one owner- and token-checked update
// renews or releases (and wakes waiters through NOTIFY in the same statement).
#include "backends/postgres/postgres_tables.hpp"

namespace dblock::postgres {
namespace {

// --min-interval ($6 ms) allows a new start of the row (`row` qualifies its columns).
std::string due(std::string_view row) {
  const std::string started = std::string(row) + "last_started_at";
  return "($6::bigint = 0 OR " + started + " IS NULL OR " + started + " <= now() - $6::bigint * interval '1 ms')";
}

// A lease row's upsert: a fresh row gets `fresh_token` (selected `source`); an existing row is
// taken only when the lease is over (and, with --min-interval, the last start is old enough),
// its token set to `next_token`. $1 key, $2 owner, $3 host, $4 pid, $5 ttl, $6 min interval.
std::string lease_upsert(const Tables& t, std::string_view fresh_token, std::string_view source,
                         std::string_view next_token) {
  return "INSERT INTO " + t.locks + " AS l (name, owner, host, pid, token, strategy, session_id, acquired_at, "
         "renewed_at, expires_at, released_at, last_started_at) "
         "SELECT $1, $2, $3, $4::bigint, " + std::string(fresh_token) + ", 'lease', NULL, now(), now(), "
         "now() + $5::bigint * interval '1 ms', NULL, now() " + std::string(source) +
         " ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, host = EXCLUDED.host, pid = EXCLUDED.pid, "
         "token = " + std::string(next_token) + ", strategy = 'lease', session_id = NULL, acquired_at = now(), "
         "renewed_at = now(), expires_at = EXCLUDED.expires_at, released_at = NULL, last_started_at = now() "
         "WHERE (l.expires_at IS NULL OR l.expires_at <= now()) AND " + due("l.") +
         " RETURNING token, " + ms("acquired_at") + " AS acq, " + ms("expires_at") + " AS exp";
}

class LeaseLocker final : public Locker {
 public:
  LeaseLocker(std::shared_ptr<Connection> conn, Tables t, int keep)
      : conn_(std::move(conn)), t_(std::move(t)), keep_(keep) {
    // One statement: fresh row, token 1; existing row, taken only when the lease is over (and,
    // with --min-interval, the last start is old enough), and every taking bumps the token.
    // When the upsert does not take the row, the same statement says why: the row as status
    // reads it (a lease's verdict: no question about sessions) and the time until due, status
    // columns first.
    const std::string why = status_select(t_, "GREATEST(0, " + ms("last_started_at + $6::bigint * interval '1 ms'") +
                                                  " - " + ms("now()") + ")",
                                          /*ask_about_sessions=*/false);
    acquire_sql_ =
        "WITH a AS (" +
        // A live lease, as this statement's snapshot sees it, is busy without locking the row:
        // the many waiters a release wakes do not queue on the row lock behind the one that wins.
        lease_upsert(t_, "1", "WHERE NOT EXISTS (SELECT 1 FROM " + t_.locks + " WHERE name = $1 AND expires_at > now())",
                     "l.token + 1") +
        ") SELECT s.*, a.token, a.acq, a.exp FROM (SELECT 1) one LEFT JOIN a ON true LEFT JOIN (" + why +
        " WHERE name = $1) s ON a.token IS NULL";
    // A semaphore's slot (src/backends/README.md, Semaphores), one statement: the header K ($7)
    // first, only when the slot looks free, then the slot's row with the header's token. Not
    // taken: the row that refused (the header, or the slot), and the header's recorded count.
    slot_sql_ = "WITH " +
                semaphore_header_ctes(t_, "NOT EXISTS (SELECT 1 FROM " + t_.locks + " WHERE name = $1 AND (expires_at > now() OR NOT " +
                                              due("") + "))",
                                      7) +
                "a AS (" + lease_upsert(t_, "h.token", "FROM h", "EXCLUDED.token") +
                ") SELECT s.*, a.token, a.acq, a.exp, (SELECT slots FROM " + t_.locks + " WHERE name = $7), " +
                std::string(semaphore_guard) + " FROM f LEFT JOIN h ON true LEFT JOIN a ON true LEFT JOIN (" + why +
                " WHERE name IN ($1, $7)) s ON a.token IS NULL AND s.name = " + semaphore_refuser(7);
    renew_sql_ = "UPDATE " + t_.locks +
                 " SET expires_at = now() + $4::bigint * interval '1 ms', renewed_at = now() "
                 "WHERE name = $1 AND owner = $2 AND token = $3::bigint AND released_at IS NULL RETURNING " +
                 ms("expires_at");
    // timestamptz(3) rounds to the nearest ms: a plain now() could be stored up to 0.5 ms in
    // the future and a status read right after the release would still say held. So could
    // acquired_at (stored rounded): with no --min-hold it is not used, or a lease released
    // within a millisecond of its acquisition would look held for up to one more. The NOTIFY
    // wakes this key's waiters once the release commits.
    release_sql_ = "WITH u AS (UPDATE " + t_.locks +
                   " SET released_at = now(), expires_at = CASE WHEN $4::bigint > 0 THEN "
                   "GREATEST(date_trunc('milliseconds', now()), acquired_at + $4::bigint * interval '1 ms') "
                   "ELSE date_trunc('milliseconds', now()) END, "
                   "last_finished_at = CASE WHEN $5::boolean THEN now() ELSE last_finished_at END, "
                   "last_exit_code = CASE WHEN $5::boolean THEN $6::int ELSE last_exit_code END "
                   "WHERE name = $1 AND owner = $3 AND token = $2::bigint AND released_at IS NULL RETURNING name)" +
                   release_tail(t_, "(SELECT count(pg_notify($7, name)) FROM u)", 8);
  }

  Result<AcquireOutcome> try_acquire(const LockRequest& req, Millis) override {
    if (!conn_->is_open())
      if (auto ok = conn_->reconnect(); !ok) return std::unexpected(ok.error());
    Params p{req.key, req.owner, req.host, std::to_string(req.pid), ms_param(req.ttl), ms_param(req.min_interval)};
    const bool slot = !req.semaphore.empty();
    if (slot) append_semaphore_params(p, req);
    const std::string& sql = slot ? slot_sql_ : acquire_sql_;
    // A semaphore's slots announce their releases on the key's channel: a waiter, which tries
    // every slot, hears any of them free up.
    const std::string channel = release_channel(t_.prefix, slot ? req.semaphore : req.key);
    // Sample values of the release's parameters, for its warm-up (planned, never run).
    Params release_sample{req.key, "0", req.owner, "0", "true", "0", channel};
    append_sample_history_params(release_sample, req, Strategy::lease, keep_);
    auto r = with_schema(*conn_, t_, [&] { return attempt(sql, p, channel, release_sample); });
    if (!r && slot && slot_taken_meanwhile(r.error())) return AcquireOutcome{};  // busy, nothing changed
    if (!r) return std::unexpected(r.error());
    // A waiter hears this key's releases at once (core polls wakeup_fd()). LISTEN goes in the
    // same round trip as a second attempt, ahead of it, so a release between the first attempt
    // and the LISTEN is not missed. A release announced while a statement ran sits in libpq's
    // queue, where polling the socket cannot see it: that is a reason to try again at once.
    for (int again = 0; again < 3 && is_busy(*r) && (!conn_->listening(channel) || conn_->drain_notifications()); ++again) {
      r = attempt(sql, p, channel, release_sample);
      if (!r && slot && slot_taken_meanwhile(r.error())) return AcquireOutcome{};
      if (!r) return std::unexpected(r.error());
    }
    AcquireOutcome out;
    if (!r->is_null(0, status_columns + 1)) {
      out.state = AcquireOutcome::State::acquired;
      out.token = r->int64(0, status_columns + 1);
      out.acquired_at_ms = r->opt_int64(0, status_columns + 2);
      out.expires_at_ms = r->opt_int64(0, status_columns + 3);
      key_ = req.key;
      held_req_ = req;
      token_ = out.token;
      // A holder needs no wake-ups, and while its command runs nobody would read them: stop
      // listening (best effort: what still arrives is dropped by every statement, renew's too).
      (void)conn_->unlisten();
      return out;
    }
    out.state = AcquireOutcome::State::busy;
    if (r->is_null(0, 0)) return out;  // no row (gone in between): busy, core simply retries
    out.holder = read_status(*r, 0, t_);
    if (slot && out.holder->key == req.semaphore) {
      // The header refused: another slot count, or a plain holder of the key.
      const auto recorded = r->opt_int64(0, status_columns + 4);
      if (recorded && *recorded != req.slots) {
        out.recorded_slots = static_cast<int>(*recorded);
        out.holder.reset();
      }
      return out;
    }
    if (out.holder->state != LockStatus::State::held && req.min_interval.count() > 0 && !r->is_null(0, status_columns)) {
      out.state = AcquireOutcome::State::not_due;
      out.due_in = Millis(r->int64(0, status_columns));
    }
    return out;
  }

  Result<void> renew(Millis ttl) override {
    if (!token_) return fail(ErrorKind::internal, "renew without a held lease");
    Params p{key_, held_req_.owner, std::to_string(*token_), ms_param(ttl)};
    auto r = exec_reconnecting(*conn_, renew_sql_, p);
    if (!r) return std::unexpected(r.error());
    if (r->rows() == 0)
      return fail(ErrorKind::lost, "lease on '" + key_ + "' (token " + std::to_string(*token_) +
                                       ") was taken over or released by someone else");
    return {};
  }

  // One statement releases, writes the history row (even when the lease was lost meanwhile:
  // the run happened) and trims the history.
  Result<void> release(const ReleaseRequest& req) override {
    if (!token_) return fail(ErrorKind::internal, "release without a held lease");
    Params p{key_,
             std::to_string(*token_),
             held_req_.owner,
             ms_param(req.min_hold),
             req.finished_run ? "true" : "false",
             req.exit_code ? Param(std::to_string(*req.exit_code)) : Param(),
             release_channel(t_.prefix, held_req_.semaphore.empty() ? key_ : held_req_.semaphore)};
    append_history_params(p, req, held_req_, *token_, Strategy::lease, keep_);
    if (!conn_->is_open())
      if (auto ok = conn_->reconnect(); !ok) return std::unexpected(ok.error());
    // Prepared and planned in this session already (release_warm_up): run by name.
    const Statement release[] = {{.sql = release_sql_, .params = p, .prepared = true}};
    auto r = with_schema(*conn_, t_, [&] { return conn_->pipeline(release); });
    if (!r) return std::unexpected(r.error());
    token_.reset();
    if (r->back().int64(0, 0) != 1) return fail(ErrorKind::lost, "lease on '" + key_ + "' was no longer ours at release");
    return {};
  }

  int wakeup_fd() const override { return conn_->socket(); }
  void consume_wakeup() override { conn_->drain_notifications(); }

 private:
  static bool is_busy(const QueryResult& r) { return r.is_null(0, status_columns + 1); }

  // The release is prepared and planned in the same round trip as the first attempt, ahead of
  // it (a warm-up, once per session, behind a Sync of its own), and the attempt is prepared at
  // its first run: the handoff to the next waiter waits for no parse and no plan, neither at
  // the release nor at the attempt the release wakes. Behind a pooler the connection names
  // nothing and these run unnamed, as they always did (Statement::prepared).
  Statement release_warm_up(const Params& sample) const {
    return {.sql = release_sql_, .params = sample, .warm_up = true, .sync_after = true, .prepared = true};
  }

  // The upsert, behind a LISTEN on the key's channel when a waiter is not listening yet.
  Result<QueryResult> attempt(const std::string& sql, const Params& p, const std::string& channel,
                              const Params& release_sample) {
    if (conn_->listening(channel) || !listen_next_) {
      listen_next_ = true;
      const Statement batch[] = {release_warm_up(release_sample), {.sql = sql, .params = p, .prepared = true}};
      auto r = conn_->pipeline(batch);
      if (!r) return std::unexpected(r.error());
      return r->back();
    }
    const std::string listen = "LISTEN " + quote_ident(channel);
    std::vector<Statement> batch;
    if (conn_->listening_any()) batch.push_back({"UNLISTEN *", {}});  // another key's, from an earlier wait
    batch.push_back({listen, {}});
    batch.push_back(release_warm_up(release_sample));
    batch.push_back({.sql = sql, .params = p, .prepared = true});
    auto r = conn_->pipeline(batch);
    if (!r) return std::unexpected(r.error());
    conn_->listened(channel);
    return r->back();
  }

  std::shared_ptr<Connection> conn_;
  Tables t_;
  int keep_;
  std::string acquire_sql_, slot_sql_, renew_sql_, release_sql_;
  std::string key_;
  std::optional<std::int64_t> token_;
  LockRequest held_req_;
  bool listen_next_ = false;  // the first attempt goes alone: most runs find the key free
};

}  // namespace

Result<QueryResult> exec_reconnecting(Connection& conn, const std::string& sql, const Params& p) {
  auto r = conn.is_open() ? conn.exec(sql, p) : fail(ErrorKind::connection, "not connected");
  if (!r && r.error().kind == ErrorKind::connection) {
    // A lease survives a short outage: reconnect once and renew (compared on the holder).
    if (auto ok = conn.reconnect(); !ok) return std::unexpected(ok.error());
    r = conn.exec(sql, p);
  }
  return r;
}

std::unique_ptr<Locker> make_lease_locker(std::shared_ptr<Connection> conn, Tables t, int history_keep) {
  return std::make_unique<LeaseLocker>(std::move(conn), std::move(t), history_keep);
}

}  // namespace dblock::postgres

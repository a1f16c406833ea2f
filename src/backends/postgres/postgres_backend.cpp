// PostgreSQL via libpq: every strategy. Its session and doctor live here; the rest is
// common/sql_backend.cpp on postgres_statements.cpp, and the session strategies' server lock is
// postgres_session_lock.cpp.
#include <map>
#include <thread>
#include <utility>

#include "backends/common/lock_rows.hpp"
#include "backends/common/schema.hpp"
#include "backends/common/sql_backend.hpp"
#include "backends/postgres/postgres_descriptor.hpp"
#include "backends/postgres/postgres_dsn.hpp"
#include "backends/postgres/postgres_tables.hpp"
#include "backends/registry.hpp"
#include "core/clock.hpp"
#include "core/semaphore.hpp"

namespace dblock::postgres {
namespace {

ConnectionRole holder_role(const BackendOptions& options) {
  return options.session_idle_limit.count() > 0 ? ConnectionRole::lock_holder : ConnectionRole::bookkeeping;
}

class PostgresBackend final : public sql::SqlBackend {
 public:
  PostgresBackend(Dsn dsn, const BackendOptions& options, std::shared_ptr<Connection> conn)
      : SqlBackend(descriptor.name, options, lease_statements(options.table_prefix), shedlock_statements(options),
                   inspect_statements(options), schema_statements(options), release_statements(options.table_prefix)),
        dsn_(std::move(dsn)),
        conn_(std::move(conn)),
        t_(postgres::tables_for(options_.table_prefix)),
        session_(make_session()) {}

  std::vector<DoctorCheck> doctor_checks(Strategy strategy) override {
    std::vector<DoctorCheck> out;
    auto add = [&out](std::string name, bool ok, std::string detail) {
      out.push_back(DoctorCheck{std::move(name), ok, std::move(detail)});
    };
    auto v = conn_->exec(
        "SELECT current_setting('server_version'), "
        "COALESCE((SELECT setting || COALESCE(unit, '') FROM pg_settings WHERE name = 'idle_session_timeout'), 'n/a'), "
        "(SELECT setting || COALESCE(unit, '') FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'), "
        "pg_backend_pid(), "
        // 'client': the value came in this connection's startup packet, so dblock's own did.
        "(SELECT source FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout') = 'client', "
        "(SELECT sum(setting::bigint) FROM pg_settings "
        " WHERE name IN ('idle_session_timeout', 'idle_in_transaction_session_timeout')) > 0");
    if (!v) {
      add("server", false, v.error().message);
      return out;
    }
    add("server", true, "PostgreSQL " + v->text(0, 0) + " at " + dsn_.redacted);
    const std::string in_effect =
        "idle_session_timeout=" + v->text(0, 1) + ", idle_in_transaction_session_timeout=" + v->text(0, 2);
    if (v->boolean(0, 4)) {
      add("idle_timeouts", true,
          "dblock's own idle limits arrive with every connection (startup options; this session's: " + in_effect +
              "): a run's own session (the lock holder's) 2 x TTL + 5 s (its renewals keep it busy; a holder cut "
              "off from the server loses the lock after that), its other sessions 0 (none)");
    } else {
      // A pooler that drops `options` (PgBouncer with it in ignore_startup_parameters) leaves
      // the server's limits on dblock's sessions, and the server's TCP peer is the pooler.
      add("idle_timeouts", true,
          "dblock's own idle limits did not arrive: something between dblock and the server dropped the "
          "startup options (PgBouncer does when ignore_startup_parameters lists options), so the server's apply "
          "to dblock's sessions: " + in_effect +
              (v->boolean(0, 5)
                   ? "; a holder session idle longer than that between two renewals (every TTL/3) is ended and "
                     "its lock lost: keep TTL/3 below it"
                   : "; none, so a holder cut off from the pooler keeps its lock until the pooler ends its server "
                     "session"));
    }
    auto pooling = pooling_check(v->int64(0, 3));
    if (!pooling) {
      add("pgbouncer", false, pooling.error().message);
    } else if (*pooling == Pooling::transaction) {
      bool session = is_session_strategy(strategy);
      add("pgbouncer", !session,
          "transaction pooling (e.g. PgBouncer pool_mode=transaction): one server session serves several "
          "clients, one transaction each; advisory, for-update and txn-insert are unsafe here; use lease or a "
          "session-pooled/direct DSN. lease waiters (-w) are not woken by the server here (LISTEN/NOTIFY does "
          "not pass transaction pooling): they poll, with a backoff of up to a second");
    } else if (*pooling == Pooling::session) {
      add("pgbouncer", true,
          "a connection pooler in session mode (the server process is not the one the connection was given, and "
          "it kept this client's session): session strategies are safe while it stays in session mode");
    } else {
      add("pgbouncer", true, "direct connection to the server (no pooler): session strategies are safe");
    }
    add_replication_check(out);
    out.push_back(sql::failover::doctor_check(*session_, lease_statements(options_.table_prefix).failover));
    auto p = conn_->exec(
        "SELECT t, to_regclass(t) IS NOT NULL, "
        "CASE WHEN to_regclass(t) IS NULL THEN has_schema_privilege(current_schema(), 'CREATE') "
        "ELSE has_table_privilege(t, 'SELECT') AND has_table_privilege(t, 'INSERT') "
        "AND has_table_privilege(t, 'UPDATE') AND has_table_privilege(t, 'DELETE') END "
        "FROM unnest(ARRAY[$1, $2, $3]) AS t",
        {t_.locks, t_.runs, t_.claims});
    if (!p) {
      add("privileges", false, p.error().message);
    } else {
      std::string bad;
      for (int i = 0; i < p->rows(); ++i)
        if (!p->boolean(i, 2))
          bad += (bad.empty() ? "" : ", ") + p->text(i, 0) +
                 (p->boolean(i, 1) ? " (needs SELECT, INSERT, UPDATE, DELETE)" : " (missing; no CREATE on the schema)");
      add("privileges", bad.empty(),
          bad.empty() ? "select/insert/update/delete on the dblock tables (or create where missing)" : "missing: " + bad);
    }
    return out;
  }

 private:
  Result<std::shared_ptr<sql::Session>> session() override { return session_; }

  // A session run's locker takes over this backend's connection: it then needs two at most.
  // Should anything use the backend afterwards (tests do, and may make more lockers), it
  // connects again, and a second session locker gets a holder session of its own.
  Result<std::unique_ptr<Locker>> make_session_locker(Strategy s) override {
    std::shared_ptr<Connection> holder;
    if (!handed_over_) {
      holder = std::exchange(conn_, Connection::deferred(dsn_, options_));
      session_ = make_session();  // status and the rest on the new connection, not the holder's
      handed_over_ = true;
    } else {
      auto opened = Connection::open(dsn_, options_, holder_role(options_));
      if (!opened) return std::unexpected(opened.error());
      holder = std::move(*opened);
    }
    return postgres::make_session_locker(s, std::move(holder), dsn_, options_, t_, schema());
  }

  // What a failover can lose: with asynchronous standbys, the last grants (the failover
  // lock-delay covers them). A standby that streams without being synchronous is asynchronous;
  // Patroni's synchronous_mode shows as synchronous_standby_names.
  void add_replication_check(std::vector<DoctorCheck>& out) {
    auto r = conn_->exec(
        "SELECT current_setting('synchronous_commit'), current_setting('synchronous_standby_names'), "
        "(SELECT count(*) FROM pg_stat_replication), "
        "(SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')), pg_is_in_recovery()");
    if (!r) {
      out.push_back({"replication", false, r.error().message});
      return;
    }
    const std::string names = r->text(0, 1);
    const std::int64_t standbys = r->int64(0, 2), synchronous = r->int64(0, 3);
    std::string detail = "synchronous_commit=" + r->text(0, 0) + ", synchronous_standby_names='" + names + "'; " +
                         std::to_string(standbys) + " standby(s) streaming, " + std::to_string(synchronous) +
                         " synchronous";
    if (names.empty() && standbys > 0)
      detail += ": asynchronous replication, so a failover can lose the last grants; after one, the failover "
                "lock-delay grants nothing for the longest TTL recorded";
    else if (!names.empty())
      detail += ": synchronous replication (Patroni synchronous_mode sets these names); a failover keeps every grant";
    out.push_back({"replication", true, detail});
  }

  enum class Pooling { none, session, transaction };

  // Who serves this connection's statements. `first` is the server process of a statement just
  // run. A server reports its own process id when the connection starts; a pooler reports one
  // of its own, so a different pg_backend_pid() means a pooler. Transaction pooling shows when
  // the server session changes between statements, which a lone client rarely sees (PgBouncer
  // hands it the session it just gave back), so a second client opens a transaction in
  // between: under transaction pooling it gets the session this connection just had (or keeps
  // this connection off it).
  Result<Pooling> pooling_check(std::int64_t first) {
    auto pid = [](Connection& c) -> Result<std::int64_t> {
      auto r = c.exec("SELECT pg_backend_pid()");
      if (!r) return std::unexpected(r.error());
      return r->int64(0, 0);
    };
    auto again = pid(*conn_);
    if (!again) return std::unexpected(again.error());
    if (*again != first) return Pooling::transaction;
    if (conn_->backend_pid() == first) return Pooling::none;
    auto other = Connection::open(dsn_, options_);
    if (!other) return std::unexpected(other.error());
    auto theirs = (*other)->exec("BEGIN; SELECT pg_backend_pid()");
    if (!theirs) return std::unexpected(theirs.error());
    // With a pool of one, this connection would wait for that transaction: ask no more.
    if (theirs->int64(0, 0) == first) return Pooling::transaction;
    auto ours = pid(*conn_);
    if (!ours) return std::unexpected(ours.error());
    return *ours != first ? Pooling::transaction : Pooling::session;  // `other` closes, its transaction ends
  }

  // The common code's view of conn_ (sql_session.hpp), shared by the lease and ShedLock lockers.
  std::shared_ptr<Session> make_session() const {
    auto session = std::make_shared<Session>(conn_, options_.table_prefix);
    session->set_schema(schema());
    return session;
  }

  Dsn dsn_;
  std::shared_ptr<Connection> conn_;
  postgres::Tables t_;
  std::shared_ptr<Session> session_;
  bool handed_over_ = false;
};

Result<std::unique_ptr<Backend>> open(const Dsn& dsn, const BackendOptions& options) {
  // Opened as a lock holder's session when a run asked for an idle limit: a session locker
  // takes this connection over (and a lease's renewals keep it far busier than that limit).
  auto conn = Connection::open(dsn, options, holder_role(options));
  if (!conn) return std::unexpected(conn.error());
  return std::unique_ptr<Backend>(
      std::make_unique<PostgresBackend>(dsn, options, std::shared_ptr<Connection>(std::move(*conn))));
}

}  // namespace
}  // namespace dblock::postgres

namespace dblock {

BackendEntry postgres_backend_entry() {
  return BackendEntry{
      postgres::descriptor,
      [](const BackendOptions& options) { return sql::schema_sql(postgres::schema_statements(options)); },
      &postgres::check_postgres_dsn,
      &postgres::open,
      [] {
        // PQlibVersion: major * 10000 + minor since PostgreSQL 10.
        const int v = PQlibVersion();
        return "libpq " + std::to_string(v / 10000) + "." + std::to_string(v % 10000);
      },
  };
}

}  // namespace dblock

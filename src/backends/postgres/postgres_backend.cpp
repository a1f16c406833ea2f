// PostgreSQL via libpq: every strategy. Its session and doctor's pooler check live here; the
// rest is core/sql/sql_backend.cpp on postgres_statements.cpp, and the session strategies' server
// lock is postgres_session_lock.cpp.
#include <utility>

#include "backends/postgres/postgres_descriptor.hpp"
#include "backends/postgres/postgres_dsn.hpp"
#include "backends/postgres/postgres_tables.hpp"
#include "backends/registry.hpp"
#include "core/sql/schema.hpp"
#include "core/sql/sql_backend.hpp"

namespace dblock::postgres {
namespace {

ConnectionRole holder_role(const BackendOptions& options) {
  return options.session_idle_limit.count() > 0 ? ConnectionRole::lock_holder : ConnectionRole::bookkeeping;
}

class PostgresBackend final : public sql::SqlBackend {
 public:
  PostgresBackend(Dsn dsn, const BackendOptions& options, std::shared_ptr<Connection> conn)
      : SqlBackend(descriptor.name, options, lease_statements(options.table_prefix), shedlock_statements(options),
                   inspect_statements(options), schema_statements(options), release_statements(options.table_prefix),
                   doctor_statements(options.table_prefix)),
        dsn_(std::move(dsn)),
        conn_(std::move(conn)),
        session_(make_session()) {}

  // Who serves this connection: the server itself, or a pooler, in session or transaction mode.
  void more_doctor_checks(sql::Session&, Strategy strategy, std::vector<DoctorCheck>& out) override {
    auto pooling = pooling_check();
    if (!pooling) {
      out.push_back({"pgbouncer", false, pooling.error().message});
    } else if (*pooling == Pooling::transaction) {
      out.push_back({"pgbouncer", !is_session_strategy(strategy),
                     "transaction pooling (e.g. PgBouncer pool_mode=transaction): one server session serves several "
                     "clients, one transaction each; advisory, for-update and txn-insert are unsafe here; use lease or a "
                     "session-pooled/direct DSN. lease waiters (-w) are not woken by the server here (LISTEN/NOTIFY does "
                     "not pass transaction pooling): they poll, with a backoff of up to a second"});
    } else if (*pooling == Pooling::session) {
      out.push_back({"pgbouncer", true,
                     "a connection pooler in session mode (the server process is not the one the connection was given, "
                     "and it kept this client's session): session strategies are safe while it stays in session mode"});
    } else {
      out.push_back({"pgbouncer", true, "direct connection to the server (no pooler): session strategies are safe"});
    }
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
    return postgres::make_session_locker(s, std::move(holder), dsn_, options_, schema());
  }

  enum class Pooling { none, session, transaction };

  // Who serves this connection's statements. A server reports its own process id when the
  // connection starts; a pooler reports one of its own, so a different pg_backend_pid() means a
  // pooler. Transaction pooling shows when the server session changes between statements, which
  // a lone client rarely sees (PgBouncer hands it the session it just gave back), so a second
  // client opens a transaction in between: under transaction pooling it gets the session this
  // connection just had (or keeps this connection off it).
  Result<Pooling> pooling_check() {
    auto pid = [](Connection& c) -> Result<std::int64_t> {
      auto r = c.exec("SELECT pg_backend_pid()");
      if (!r) return std::unexpected(r.error());
      return (*r)[0].int64(0);
    };
    auto started = pid(*conn_);
    if (!started) return std::unexpected(started.error());
    const std::int64_t first = *started;
    auto again = pid(*conn_);
    if (!again) return std::unexpected(again.error());
    if (*again != first) return Pooling::transaction;
    if (conn_->backend_pid() == first) return Pooling::none;
    auto other = Connection::open(dsn_, options_);
    if (!other) return std::unexpected(other.error());
    auto theirs = (*other)->exec("BEGIN; SELECT pg_backend_pid()");
    if (!theirs) return std::unexpected(theirs.error());
    // With a pool of one, this connection would wait for that transaction: ask no more.
    if ((*theirs)[0].int64(0) == first) return Pooling::transaction;
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

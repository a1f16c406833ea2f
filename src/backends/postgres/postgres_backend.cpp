// PostgreSQL via libpq: every strategy. Its session lives here; the rest is
// core/sql/sql_backend.cpp on postgres_statements.cpp, and the session strategies' server
// lock is postgres_session_lock.cpp.
#include <algorithm>
#include <future>
#include <utility>

#include "backends/postgres/postgres_descriptor.hpp"
#include "backends/postgres/postgres_dsn.hpp"
#include "backends/postgres/postgres_tables.hpp"
#include "backends/backend_entry.hpp"
#include "core/sql/schema.hpp"
#include "core/sql/sql_backend.hpp"
#include "core/sql/statement_catalog.hpp"

namespace dblock::postgres {
namespace {

ConnectionRole holder_role(const BackendOptions& options) {
  return options.session_idle_limit.count() > 0 ? ConnectionRole::lock_holder : ConnectionRole::bookkeeping;
}

class PostgresBackend final : public sql::SqlBackend {
 public:
  PostgresBackend(Dsn dsn, const BackendOptions& options, std::shared_ptr<Connection> conn,
                  std::unique_ptr<Connection> book)
      : SqlBackend(descriptor.name, options, lease_statements(options.table_prefix), shedlock_statements(options),
                   inspect_statements(options), schema_statements(options), release_statements(options.table_prefix),
                   doctor_statements(options)),
        dsn_(std::move(dsn)),
        conn_(std::move(conn)),
        book_(std::move(book)),
        session_(make_session()) {}

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
    // Whether the lock could hold here is judged on the bookkeeping session's failover read,
    // before the first take (serving_check); the locker may outlive this Backend.
    auto open_other = [dsn = dsn_, options = options_]() -> Result<std::unique_ptr<sql::Session>> {
      return std::make_unique<Session>(Connection::deferred(dsn, options), options.table_prefix);
    };
    return postgres::make_session_locker(s, std::move(holder), dsn_, options_, schema(),
                                         serving_check(s, std::move(open_other)), std::exchange(book_, nullptr));
  }

  Result<std::unique_ptr<sql::Session>> another_session() override {
    return std::make_unique<Session>(Connection::deferred(dsn_, options_), options_.table_prefix);
  }

  // The common code's view of conn_ (sql_session.hpp), shared by the lease and ShedLock lockers.
  std::shared_ptr<Session> make_session() const {
    auto session = std::make_shared<Session>(conn_, options_.table_prefix);
    session->set_schema(schema());
    return session;
  }

  Dsn dsn_;
  std::shared_ptr<Connection> conn_;
  std::unique_ptr<Connection> book_;  // opened with conn_ for a row lock's locker (open)
  std::shared_ptr<Session> session_;
  bool handed_over_ = false;
};

Result<std::unique_ptr<Backend>> open(const Dsn& dsn, const BackendOptions& options) {
  // ShedLock's JDBC provider writes its table's name unquoted, which PostgreSQL folds to lower
  // case; dblock quotes it. --table ShedLock would be a second table that no Java service locks.
  std::string folded = options.shedlock_table;
  std::transform(folded.begin(), folded.end(), folded.begin(), [](char c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; });
  if (options.shedlock && folded != options.shedlock_table)
    return fail(ErrorKind::config, "--table " + options.shedlock_table +
                                       ": ShedLock writes its table's name unquoted, which PostgreSQL folds to lower "
                                       "case, so its services lock in " + folded + ", not in this table; use --table " +
                                       folded);
  // A run that will hold a row lock needs a bookkeeping connection too (needs_book): both are
  // opened at once, side by side, so the run waits for one handshake rather than two in a row.
  std::future<Result<std::unique_ptr<Connection>>> opening;
  if (options.locker_strategy && needs_book(*options.locker_strategy) && !options.inspect)
    opening = std::async(std::launch::async, [&dsn, &options] { return Connection::open(dsn, options); });
  // Opened as a lock holder's session when a run asked for an idle limit: a session locker
  // takes this connection over (and a lease's renewals keep it far busier than that limit).
  auto conn = Connection::open(dsn, options, holder_role(options));
  std::unique_ptr<Connection> book;
  if (opening.valid()) {
    auto opened = opening.get();
    if (conn && !opened) return std::unexpected(opened.error());
    if (opened) book = std::move(*opened);
  }
  if (!conn) return std::unexpected(conn.error());
  return std::unique_ptr<Backend>(std::make_unique<PostgresBackend>(
      dsn, options, std::shared_ptr<Connection>(std::move(*conn)), std::move(book)));
}

// Every statement of this dialect, named, for `dblock schema --statements` (BackendEntry).
std::vector<sql::Statement> every_statement(const BackendOptions& options) {
  BackendOptions shed = options;
  shed.shedlock = true;
  const sql::QueueStatements queue = queue_statements();
  sql::StatementCatalog c;
  c.add(lease_statements(options.table_prefix));
  c.add(lock_statements(options.table_prefix));
  c.add(queue.wait);
  c.add(queue.leave);
  c.add(queue.wait_ahead);
  c.add(release_statements(options.table_prefix));
  c.add(inspect_statements(options));
  c.add(shedlock_statements(shed));
  c.add(inspect_statements(shed), "--table-format shedlock");
  c.add(doctor_statements(shed));
  c.add(schema_statements(shed));
  return c.statements();
}

}  // namespace
}  // namespace dblock::postgres

namespace dblock {

BackendEntry postgres_backend_entry() {
  return BackendEntry{
      postgres::descriptor,
      [](const BackendOptions& options) { return sql::schema_sql(postgres::schema_statements(options)); },
      &postgres::every_statement,
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

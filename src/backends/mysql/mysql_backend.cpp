// The MySQL/MariaDB backend: its session and the registry entry; the rest is
// core/sql/sql_backend.cpp on mysql_statements.cpp.
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/mysql/mysql_descriptor.hpp"
#include "backends/mysql/mysql_tables.hpp"
#include "backends/backend_entry.hpp"
#include "core/sql/schema.hpp"
#include "core/sql/sql_backend.hpp"
#include "core/sql/statement_catalog.hpp"

namespace dblock::mysql {
namespace {

// A run's statement families (the lease's; a session strategy's lock statements, made on it),
// built once per process and kept: open() builds them before its first connection, on the
// guess that the server is MariaDB, so that a contender's work once its connection is open is
// only its statements' binding and what follows the answer. In a start storm against
// max_connections that work, slowed by a thousand other contenders, is what holds a connection
// the next contender is turned away for; and one turned away connects again, with the families
// built. A MySQL server's are built when its handshake says so.
struct RunFamilies {
  std::string prefix;
  bool mariadb = false;
  sql::LeaseStatements lease;
  std::optional<sql::LockStatements> lock;
};
std::mutex run_families_mutex;
std::vector<std::unique_ptr<RunFamilies>> run_families;  // at most one per prefix and server kind

// The families for `prefix` on MariaDB or MySQL (`mariadb`), with the lock statements when
// `with_lock`; built here the first time. The reference stays valid to the process's end.
const RunFamilies& families(const std::string& prefix, bool mariadb, bool with_lock) {
  std::lock_guard lock(run_families_mutex);
  RunFamilies* f = nullptr;
  for (auto& built : run_families)
    if (built->prefix == prefix && built->mariadb == mariadb) f = built.get();
  if (!f) {
    run_families.push_back(std::make_unique<RunFamilies>(RunFamilies{prefix, mariadb, lease_statements(prefix, mariadb), {}}));
    f = run_families.back().get();
  }
  if (with_lock && !f->lock) f->lock = lock_statements(prefix, mariadb, f->lease);
  return *f;
}

class MysqlBackend final : public sql::SqlBackend {
 public:
  MysqlBackend(Dsn dsn, const BackendOptions& options, std::unique_ptr<Connection> conn,
               std::unique_ptr<Connection> holder)
      // Built on first use, as SQLite's (sql::Statements): a run needs the lease's (or a session
      // strategy's, lock_statements on the lease's: make_session_locker), `status` inspection's;
      // a run's built before its connection (families).
      : SqlBackend(descriptor.name, options,
                   std::function([p = options.table_prefix, m = conn->mariadb()] { return families(p, m, false).lease; }),
                   std::function([options] { return shedlock_statements(options); }),
                   std::function([options] { return inspect_statements(options); }), schema_statements(options),
                   std::function([p = options.table_prefix] { return release_statements(p); }),
                   doctor_statements(options, conn->mariadb())),
        dsn_(std::move(dsn)),
        mariadb_(conn->mariadb()),
        session_(new_session(std::move(conn))),
        holder_(std::move(holder)) {}

 private:
  // After make_locker handed the connection over, anything still asked of this Backend (tests
  // do) gets a new one.
  Result<std::shared_ptr<sql::Session>> session() override {
    if (!session_) {
      auto c = Connection::open(dsn_, options_);
      if (!c) return std::unexpected(c.error());
      session_ = new_session(std::move(*c));
    }
    return session_;
  }

  // The locker takes this connection over (backend.hpp): it keeps the key's wake name there
  // while it holds and blocks there while it waits, which no other locker's statements may share.
  Result<std::unique_ptr<Locker>> make_session_locker(Strategy strategy) override {
    if (auto s = session(); !s) return std::unexpected(s.error());
    std::shared_ptr<Session> book = std::exchange(session_, nullptr);
    // It sits idle while the job runs and, where the holder's session could not take the key's
    // wake name with the lock (a semaphore's slot; a last holder's session not yet ended), holds
    // it for the row-lock strategies' waiters, so it keeps its idle limits; advisory's is its
    // holder session, which sets a holder's once it holds (mysql_session_lock.cpp, holding).
    if (strategy != Strategy::advisory)
      if (auto idle = book->keep_idle(); !idle) return std::unexpected(idle.error());
    // The holder's connection opened beside this one (open), when it was for this strategy.
    std::unique_ptr<Connection> opened = std::exchange(holder_, nullptr);
    if (!options_.locker_strategy || *options_.locker_strategy != strategy) opened.reset();
    const std::string& prefix = options_.table_prefix;
    const RunFamilies& built = families(prefix, mariadb_, true);
    auto holder = open_holder(strategy, dsn_, options_, book, *built.lock, std::move(opened));
    if (!holder) return std::unexpected(holder.error());
    // Whether the lock could hold here is judged on the bookkeeping session's failover read,
    // before the first take (serving_check).
    auto open_other = [dsn = dsn_, options = options_]() -> Result<std::unique_ptr<sql::Session>> {
      auto other = Connection::open(dsn, options);
      if (!other) return std::unexpected(other.error());
      return std::make_unique<Session>(std::move(*other), options.table_prefix);
    };
    return sql::make_session_locker(strategy, std::move(*holder), *built.lock, std::move(book), built.lease, prefix,
                                    options_.history_keep,
                                    serving_check(strategy, open_other));
  }

  std::shared_ptr<Session> new_session(std::unique_ptr<Connection> conn) const {
    auto session = std::make_shared<Session>(std::move(conn), options_.table_prefix);
    session->set_schema(schema());
    return session;
  }

  Result<std::unique_ptr<sql::Session>> another_session() override {
    auto other = Connection::open(dsn_, options_);
    if (!other) return std::unexpected(other.error());
    return std::make_unique<Session>(std::move(*other), options_.table_prefix);
  }

  Dsn dsn_;
  bool mariadb_;
  std::shared_ptr<Session> session_;  // shared with the lease and ShedLock lockers (make_locker)
  std::unique_ptr<Connection> holder_;  // a session strategy's holder connection, opened with session_ (open)
};

Result<std::unique_ptr<Backend>> open(const Dsn& dsn, const BackendOptions& options) {
  // A run's statement families, before any of its connections (families): its server is
  // MariaDB, most likely.
  if (options.locker_strategy && !options.inspect)
    families(options.table_prefix, true, is_session_strategy(*options.locker_strategy));
  // A run of a row-lock strategy needs a holder connection too: both are opened at once, side by
  // side, so the run waits for one handshake rather than two in a row (a few round trips at a
  // distance), as PostgreSQL's open does. advisory's run needs one connection, its holder's, which
  // is also its bookkeeping session (make_session_locker): a contender in a start storm against
  // max_connections knocks once.
  std::future<Result<std::unique_ptr<Connection>>> opening;
  if (options.locker_strategy && is_session_strategy(*options.locker_strategy) &&
      *options.locker_strategy != Strategy::advisory && !options.inspect)
    opening = std::async(std::launch::async, [&dsn, &options] {
      return open_holder_connection(*options.locker_strategy, dsn, options);
    });
  // A row-lock run's bookkeeping session keeps its idle limits (make_session_locker): set with
  // the connection, while the holder's opens.
  const bool keeps_idle = opening.valid();
  auto conn = Connection::open(dsn, options, ConnectionRole::bookkeeping, {}, keeps_idle);
  std::unique_ptr<Connection> holder;
  if (opening.valid()) {
    auto opened = opening.get();
    if (conn && !opened) return std::unexpected(opened.error());
    if (opened) holder = std::move(*opened);
  }
  if (!conn) return std::unexpected(conn.error());
  return std::unique_ptr<Backend>(std::make_unique<MysqlBackend>(dsn, options, std::move(*conn), std::move(holder)));
}

// Every statement of this dialect, named, for `dblock schema --statements` (BackendEntry).
std::vector<sql::Statement> every_statement(const BackendOptions& options) {
  BackendOptions shed = options;
  shed.shedlock = true;
  const WakeStatements wake = wake_statements(options.table_prefix, false);
  sql::StatementCatalog c;
  c.add(lease_statements(options.table_prefix, false));
  c.add(lease_statements(options.table_prefix, true), "MariaDB");
  c.add(lock_statements(options.table_prefix, false));
  c.add(lock_statements(options.table_prefix, true), "MariaDB");
  for (const sql::Statement* st : {&wake.wake_hold, &wake.wake_release, &wake.wake_wait, &wake.taken_holding})
    c.add(*st);
  c.add(wake_statements(options.table_prefix, true).wait_ahead);  // ahead of a lease take, in a block: MariaDB only
  c.add(release_statements(options.table_prefix));
  c.add(inspect_statements(options));
  c.add(shedlock_statements(shed));
  c.add(inspect_statements(shed), "--table-format shedlock");
  c.add(doctor_statements(shed, false));
  c.add(doctor_statements(shed, true), "MariaDB");
  c.add(schema_statements(shed));
  return c.statements();
}

}  // namespace
}  // namespace dblock::mysql

namespace dblock {

BackendEntry mysql_backend_entry() {
  return BackendEntry{
      mysql::descriptor,
      [](const BackendOptions& options) { return sql::schema_sql(mysql::schema_statements(options)); },
      &mysql::every_statement,
      [](const Dsn& dsn) -> Result<void> {
        if (auto parsed = mysql::parse_mysql_dsn(dsn); !parsed) return std::unexpected(parsed.error());
        return {};
      },
      &mysql::open,
      // MariaDB Connector/C reports its own version here (3.x), libmysqlclient the server's.
      [] {
#ifdef MARIADB_PACKAGE_VERSION
        return std::string("libmariadb ") + mysql_get_client_info();
#else
        return std::string("libmysqlclient ") + mysql_get_client_info();
#endif
      },
  };
}

}  // namespace dblock

// The SQLite backend: one host's coordinator (local cron, containers sharing a volume, CI).
// Only the lease strategy: SQLite has no sessions another process could see die. Its clock
// rules are in sqlite_tables.hpp; its statements, for the common lockers, in sqlite_statements.cpp.

#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <functional>
#include <utility>

#include "backends/sqlite/sqlite_file.hpp"
#include "backends/backend_entry.hpp"
#include "backends/sqlite/sqlite_descriptor.hpp"
#include "backends/sqlite/sqlite_dsn.hpp"
#include "backends/sqlite/sqlite_tables.hpp"
#include "core/sql/inspect.hpp"
#include "core/sql/schema.hpp"
#include "core/sql/sql_backend.hpp"
#include "core/sql/statement_catalog.hpp"

namespace dblock::sqlite {
namespace {

constexpr const char* only_lease =
    "the sqlite backend supports only the lease strategy; advisory, for-update and txn-insert need a "
    "mysql:// or postgres:// DSN";

class SqliteBackend final : public sql::SqlBackend {
 public:
  SqliteBackend(Connection conn, const BackendOptions& options)
      // Each family built when first used (sql::Statements): a run builds the lease's alone.
      : SqlBackend(descriptor.name, options, std::function([p = options.table_prefix] { return lease_statements(p); }),
                   std::function([options] { return shedlock_statements(options); }),
                   std::function([options] { return inspect_statements(options); }), schema_statements(options),
                   std::function([p = options.table_prefix] { return release_statements(p); })),
        conn_(std::make_shared<Connection>(std::move(conn))),
        session_(std::make_shared<Session>(conn_)) {
    session_->set_schema(schema());
  }

  std::vector<DoctorCheck> doctor_checks(Strategy strategy) override {
    std::vector<DoctorCheck> checks;
    if (strategy != Strategy::lease) checks.push_back({"strategy", false, only_lease});
    checks.push_back(check_writable());
    checks.push_back(check_journal_mode());
    checks.push_back(check_filesystem());
    return checks;
  }

 private:
  Result<std::shared_ptr<sql::Session>> session() override { return session_; }
  Result<std::unique_ptr<Locker>> make_session_locker(Strategy) override { return fail(ErrorKind::config, only_lease); }

  DoctorCheck check_writable() {
    const std::string& path = conn_->path();
    const std::string dir = files::parent_dir(path);
    if (::access(path.c_str(), W_OK) != 0)
      return {"privileges", false, "the database file " + path + " is not writable: " + std::strerror(errno)};
    if (::access(dir.c_str(), W_OK) != 0)
      return {"privileges", false,
              "the directory " + dir + " is not writable (SQLite creates its -wal and -shm files there): " +
                  std::strerror(errno)};
    // An inspection opened the file read-only on purpose: the permissions above are the answer.
    if (options_.inspect) return {"privileges", true, "the database file " + path + " is writable"};
    if (sqlite3_db_readonly(conn_->get(), "main") == 1)
      return {"privileges", false, "SQLite opened " + path + " read-only"};
    auto tx = sql::Transaction::begin(*session_, "BEGIN IMMEDIATE");
    if (!tx) return {"privileges", false, tx.error().message};
    return {"privileges", true, "the database file " + path + " is writable"};
  }

  DoctorCheck check_journal_mode() {
    auto mode = conn_->journal_mode();
    if (!mode) return {"journal_mode", false, mode.error().message};
    if (*mode == "wal") return {"journal_mode", true, "the journal mode is WAL"};
    return {"journal_mode", false,
            "the journal mode is " + *mode +
                ", not WAL: writers block readers (the file system may lack the shared memory WAL needs)"};
  }

  DoctorCheck check_filesystem() {
    auto network = files::network_filesystem(files::parent_dir(conn_->path()));
    if (!network) return {"filesystem", false, network.error().message};
    if (*network)
      return {"filesystem", false,
              conn_->path() + " is on a " + std::string(**network) +
                  " file system, where SQLite's file locks are unreliable: use a local disk, or a mysql:// "
                  "or postgres:// DSN to coordinate several hosts"};
    return {"filesystem", true, conn_->path() + " is on a local file system"};
  }

  std::shared_ptr<Connection> conn_;
  std::shared_ptr<Session> session_;  // shared with the locker (make_locker)
};

Result<std::unique_ptr<Backend>> open_sqlite(const Dsn& dsn, const BackendOptions& options) {
  auto path = sqlite::database_path(dsn);
  if (!path) return std::unexpected(path.error());
  auto conn = Connection::open(*path, options.io_timeout,
                               {.read_only = options.inspect,
                                .create_directories = options.create_directories,
                                .private_root = options.private_root});
  if (!conn) return std::unexpected(conn.error());
  return std::make_unique<SqliteBackend>(std::move(*conn), options);
}

// Every statement of this dialect, named, for `dblock schema --statements` (BackendEntry).
std::vector<sql::Statement> every_statement(const BackendOptions& options) {
  BackendOptions shed = options;
  shed.shedlock = true;
  sql::StatementCatalog c;
  c.add(lease_statements(options.table_prefix));
  c.add(release_statements(options.table_prefix));
  c.add(inspect_statements(options));
  c.add(shedlock_statements(shed));
  c.add(inspect_statements(shed), "--table-format shedlock");
  c.add(schema_statements(shed));
  return c.statements();
}

}  // namespace
}  // namespace dblock::sqlite

namespace dblock {

BackendEntry sqlite_backend_entry() {
  return BackendEntry{
      sqlite::descriptor,
      [](const BackendOptions& options) { return sql::schema_sql(sqlite::schema_statements(options)); },
      &sqlite::every_statement,
      [](const Dsn& dsn) -> Result<void> {
        if (auto path = sqlite::database_path(dsn); !path) return std::unexpected(path.error());
        return {};
      },
      &sqlite::open_sqlite,
      [] { return std::string("SQLite ") + sqlite3_libversion(); },
  };
}

}  // namespace dblock

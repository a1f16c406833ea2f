// The SQLite backend: one host's coordinator (local cron, containers sharing a volume, CI).
// Only the lease strategy: SQLite has no sessions another process could see die. Its clock
// rules are in sqlite_tables.hpp; its statements, for the common lockers, in sqlite_statements.cpp.

#include <sys/statfs.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

#include "backends/common/inspect.hpp"
#include "backends/common/lease_locker.hpp"
#include "backends/common/schema.hpp"
#include "backends/common/shedlock_locker.hpp"
#include "backends/registry.hpp"
#include "backends/sqlite/sqlite_descriptor.hpp"
#include "backends/sqlite/sqlite_dsn.hpp"
#include "backends/sqlite/sqlite_tables.hpp"

namespace dblock::sqlite {
namespace {

using rows::describe;

constexpr const char* only_lease =
    "the sqlite backend supports only the lease strategy; advisory, for-update and txn-insert need a "
    "mysql:// or postgres:// DSN";

struct NetworkFs {
  unsigned long magic;
  const char* name;
};

// statfs(2) f_type values of file systems whose locking SQLite cannot trust.
constexpr std::array<NetworkFs, 13> network_filesystems{{
    {0x6969, "NFS"},
    {0x517B, "SMB"},
    {0xFF534D42, "CIFS"},
    {0xFE534D42, "SMB2"},
    {0x65735546, "FUSE"},
    {0x00C36400, "Ceph"},
    {0x01021997, "9p"},
    {0x5346414F, "AFS"},
    {0x73757245, "Coda"},
    {0x01161970, "GFS2"},
    {0x7461636F, "OCFS2"},
    {0x0BD00BD0, "Lustre"},
    {0x47504653, "GPFS"},
}};

std::string directory_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

class SqliteBackend final : public Backend {
 public:
  SqliteBackend(Connection conn, const BackendOptions& options)
      : conn_(std::make_shared<Connection>(std::move(conn))),
        options_(options),
        tables_(options.table_prefix),
        session_(std::make_shared<Session>(conn_)),
        inspect_(inspect_statements(options)) {
    session_->set_schema(std::make_shared<const sql::SchemaStatements>(schema_statements(options)));
  }

  std::string_view name() const override { return "sqlite"; }

  Result<void> ensure_schema() override { return sql::ensure_schema(*session_); }

  Result<void> check_schema() override { return sql::check_schema(*session_); }

  Result<std::unique_ptr<Locker>> make_locker(Strategy strategy) override {
    if (strategy != Strategy::lease) return fail(ErrorKind::config, only_lease);
    // The locker shares this connection (backend.hpp: the Backend is not used after
    // make_locker): a second one would cost a `run` another open, WAL-index mapping and
    // schema read. Every transaction of either side begins and ends within one call.
    const std::string& prefix = options_.table_prefix;
    if (options_.shedlock)
      return sql::make_shedlock_locker(session_, shedlock_statements(options_), lease_statements(prefix),
                                       options_.history_keep);
    return sql::make_lease_locker(session_, lease_statements(prefix), prefix, options_.history_keep);
  }

  Result<std::vector<LockStatus>> status(std::span<const std::string> keys) override {
    auto decode = options_.shedlock ? &sql::shedlock_holder : &sql::decode_status_row;
    auto found = sql::read_status(*session_, inspect_, keys, decode);
    if (!found && options_.inspect && !options_.shedlock) {
      if (auto locks = locks_columns(); locks && !locks->empty() && !locks->contains("boot_id"))
        found = sql::read_status(*session_, inspect_statements(options_, /*without_boot_columns=*/true), keys, decode);
    }
    if (!found) return explained(found.error());
    return found;
  }

  Result<int> slot_count(const std::string& key) override {
    if (options_.shedlock) return 0;
    // Inspection adds no column: a table from before semaphores has none.
    auto locks = locks_columns();
    if (!locks) return explained(locks.error());
    if (!locks->contains("slots")) return 0;
    auto slots = sql::read_slot_count(*session_, inspect_, key);
    if (!slots) return explained(slots.error());
    return slots;
  }

  Result<std::vector<RunRecord>> history(const std::string& key, int limit) override {
    auto runs = sql::read_history(*session_, inspect_, key, limit);
    if (!runs) return explained(runs.error());
    return runs;
  }

  Result<std::int64_t> renew(const std::string& key, const HolderSelector& who, Millis ttl) override {
    return sql::renew_named(*session_, inspect_, key, who, ttl);
  }

  Result<void> release(const std::string& key, const HolderSelector& who) override {
    if (options_.shedlock) return shedlock_release(*conn_, options_, key, who);
    if (!who.force && !who.owner && !who.token)
      return fail(ErrorKind::usage, "release needs the holder's owner or token, or --force");
    const std::string now = now_sql();
    // --force also cuts short a --min-hold that a finished holder left behind.
    auto stmt = conn_->prepare("UPDATE " + tables_.locks + " SET released_at = " + now + ", expires_at = " + now +
                              ", boot_expires_ms = dblock_boot_ms()"
                              " WHERE name = ?1 AND (?4 AND (released_at IS NULL OR " +
                              lease_live_sql("") + ") OR NOT ?4 AND released_at IS NULL AND (?2 IS NULL OR owner = ?2)"
                              " AND (?3 IS NULL OR token = ?3)) RETURNING 1");
    if (!stmt) return std::unexpected(stmt.error());
    stmt->bind(1, std::string_view(key));
    stmt->bind(2, who.owner);
    stmt->bind(3, who.token);
    stmt->bind(4, static_cast<std::int64_t>(who.force ? 1 : 0));
    auto row = stmt->step("releasing " + key);
    if (!row) return std::unexpected(row.error());
    if (!*row && !who.force) return fail(ErrorKind::lost, "the lock " + key + " is not held by " + describe(who));
    return stmt->run("releasing " + key);
  }

  Result<std::int64_t> now_ms() override { return sql::read_now_ms(*session_, inspect_); }

  std::vector<DoctorCheck> doctor_checks(Strategy strategy) override {
    std::vector<DoctorCheck> checks;
    if (strategy != Strategy::lease) checks.push_back({"strategy", false, only_lease});
    checks.push_back(check_writable());
    checks.push_back(check_journal_mode());
    checks.push_back(check_filesystem());
    return checks;
  }

 private:
  // SQLite reports a missing table as plain SQLITE_ERROR, the code of many mistakes; the
  // schema, read only on this error path, says whether the tables are there at all.
  std::unexpected<Error> explained(const Error& failed) const {
    if ((failed.native_code & 0xff) != SQLITE_ERROR) return std::unexpected(failed);
    if (auto shape = sql::check_schema(*session_); !shape) return std::unexpected(shape.error());
    return std::unexpected(failed);
  }

  // The columns of <prefix>locks, none when it does not exist: inspection reads a table of an
  // older dblock as it is, and adds nothing.
  Result<std::map<std::string, bool>> locks_columns() {
    auto found = sql::read_columns(*session_);
    if (!found) return std::unexpected(found.error());
    return (*found)[options_.table_prefix + "locks"];
  }

  DoctorCheck check_writable() {
    const std::string& path = conn_->path();
    const std::string dir = directory_of(path);
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
    auto tx = Transaction::begin_immediate(*conn_, "taking the write lock");
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
    const std::string dir = directory_of(conn_->path());
    struct statfs fs{};
    if (::statfs(dir.c_str(), &fs) != 0)
      return {"filesystem", false, "cannot inspect the file system of " + dir + ": " + std::strerror(errno)};
    const auto magic = static_cast<unsigned long>(fs.f_type) & 0xFFFFFFFFUL;
    for (const auto& nfs : network_filesystems)
      if (nfs.magic == magic)
        return {"filesystem", false,
                conn_->path() + " is on a " + nfs.name +
                    " file system, where SQLite's file locks are unreliable: use a local disk, or a mysql:// "
                    "or postgres:// DSN to coordinate several hosts"};
    return {"filesystem", true, conn_->path() + " is on a local file system"};
  }

  std::shared_ptr<Connection> conn_;
  BackendOptions options_;
  Tables tables_;
  std::shared_ptr<Session> session_;  // shared with the locker (make_locker)
  sql::InspectStatements inspect_;
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

}  // namespace
}  // namespace dblock::sqlite

namespace dblock {

BackendEntry sqlite_backend_entry() {
  return BackendEntry{
      sqlite::descriptor,
      [](const BackendOptions& options) { return sql::schema_sql(sqlite::schema_statements(options)); },
      [](const Dsn& dsn) -> Result<void> {
        if (auto path = sqlite::database_path(dsn); !path) return std::unexpected(path.error());
        return {};
      },
      &sqlite::open_sqlite,
      [] { return std::string("SQLite ") + sqlite3_libversion(); },
  };
}

}  // namespace dblock

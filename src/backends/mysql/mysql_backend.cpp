// The MySQL/MariaDB backend: its session, doctor and the registry entry; the rest is common/sql_backend.cpp on mysql_statements.cpp.
// The session strategies' locker lives in mysql_session_strategies.cpp.
#include <charconv>

#include "backends/common/lock_rows.hpp"
#include "backends/common/schema.hpp"
#include "backends/common/sql_backend.hpp"
#include "backends/mysql/mysql_descriptor.hpp"
#include "backends/mysql/mysql_error.hpp"
#include "backends/mysql/mysql_tables.hpp"
#include "backends/registry.hpp"

namespace dblock::mysql {
namespace {

std::int64_t to_i64(const Value& v) {
  std::int64_t out = 0;
  if (v) std::from_chars(v->data(), v->data() + v->size(), out);
  return out;
}

// Which incarnation expression the server knows (mysql_statements.cpp): the handshake's
// version string says, without a round trip.
bool is_mariadb(const Connection& conn) { return conn.server_info().find("MariaDB") != std::string::npos; }

class MysqlBackend final : public sql::SqlBackend {
 public:
  MysqlBackend(Dsn dsn, const BackendOptions& options, std::unique_ptr<Connection> conn)
      : SqlBackend(descriptor.name, options, lease_statements(options.table_prefix, is_mariadb(*conn)),
                   shedlock_statements(options),
                   inspect_statements(options), schema_statements(options), release_statements(options.table_prefix)),
        dsn_(std::move(dsn)),
        session_(new_session(std::move(conn))),
        conn_(session_->connection()),
        t_(make_tables(options_.table_prefix)) {}

  std::vector<DoctorCheck> doctor_checks(Strategy strategy) override {
    std::vector<DoctorCheck> checks;
    auto c = db();
    if (!c) return {{"server", false, c.error().message}};
    checks.push_back({"server", true, conn_->server_info() + " at " + dsn_.redacted});
    checks.push_back(check_privileges());
    checks.push_back(check_wait_timeout());
    checks.push_back(check_galera(strategy));
    if (is_session_strategy(strategy)) checks.push_back(check_processlist());
    if (auto s = session(); s)
      checks.push_back(sql::failover::doctor_check(**s, lease_statements(options_.table_prefix, mariadb()).failover));
    return checks;
  }

 private:
  bool mariadb() const { return is_mariadb(*conn_); }

  // After make_locker handed the connection over, anything still asked of this Backend (tests
  // do) gets a new one.
  Result<std::shared_ptr<sql::Session>> session() override {
    if (!session_ || !session_->connection()) {
      auto c = Connection::open(dsn_, options_);
      if (!c) return std::unexpected(c.error());
      session_ = new_session(std::move(*c));
      conn_ = session_->connection();
    }
    return session_;
  }
  Result<Connection*> db() {
    auto s = session();
    if (!s) return std::unexpected(s.error());
    return conn_;
  }

  // The locker takes this connection over (backend.hpp): a session strategy then costs the
  // server one connection besides its lock's session.
  Result<std::unique_ptr<Locker>> make_session_locker(Strategy strategy) override {
    if (auto s = session(); !s) return std::unexpected(s.error());
    const bool maria = mariadb();
    // A session locker takes the session over: it keeps the key's wake name there while it
    // holds and blocks there while it waits, which no other locker's statements may share.
    std::shared_ptr<Session> book = std::exchange(session_, nullptr);
    conn_ = nullptr;
    auto lock = make_session_lock(strategy, dsn_, options_, book);
    if (!lock) return std::unexpected(lock.error());
    const std::string& prefix = options_.table_prefix;
    return sql::make_session_locker(strategy, std::move(*lock), std::move(book), lease_statements(prefix, maria), prefix,
                                    options_.history_keep);
  }

  std::shared_ptr<Session> new_session(std::unique_ptr<Connection> conn) const {
    auto session = std::make_shared<Session>(std::move(conn), options_.table_prefix);
    session->set_schema(schema());
    return session;
  }

  // Proves insert/update/delete on every table with a probe rolled back at once; the probe key
  // holds a control character, which no valid key can, so it never meets a real row.
  DoctorCheck check_privileges() {
    DoctorCheck check{"privileges", true, ""};
    const std::string_view probe = "\x01" "dblock-doctor";
    std::string failed;
    bool no_tables = false;
    if (auto r = conn_->query("START TRANSACTION"); !r) return {"privileges", false, r.error().message};
    const std::vector<std::pair<std::string, std::string>> statements{
        {"INSERT INTO " + t_.locks + " (name) VALUES (?)", t_.locks},
        {"UPDATE " + t_.locks + " SET owner = 'doctor' WHERE name = ?", t_.locks},
        {"DELETE FROM " + t_.locks + " WHERE name = ?", t_.locks},
        {"INSERT INTO " + t_.runs + " (name, token, outcome) VALUES (?, 0, 'ok')", t_.runs},
        {"DELETE FROM " + t_.runs + " WHERE name = ?", t_.runs},
        {"INSERT INTO " + t_.claims + " (name, kind) VALUES (?, 'doctor')", t_.claims},
        {"DELETE FROM " + t_.claims + " WHERE name = ?", t_.claims},
    };
    for (const auto& [sql, table] : statements)
      if (auto r = conn_->execute(Sql(sql, probe)); !r) {
        failed = r.error().message;
        no_tables = is_no_such_table(r.error());
        break;
      }
    (void)conn_->query("ROLLBACK");
    auto grants = conn_->execute("SELECT COUNT(*) FROM information_schema.SCHEMA_PRIVILEGES WHERE TABLE_SCHEMA = "
                                 "DATABASE() AND PRIVILEGE_TYPE = 'CREATE'");
    auto global = conn_->execute("SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES WHERE PRIVILEGE_TYPE = 'CREATE'");
    const bool can_create = (grants && to_i64(grants->rows.at(0).at(0)) > 0) || (global && to_i64(global->rows.at(0).at(0)) > 0);
    // Doctor only looks: tables that are not there yet are the tables check's finding; here
    // what matters is whether the first run (or `dblock init`) may create them.
    if (no_tables)
      return {"privileges", can_create,
              can_create ? "the dblock tables do not exist yet; the CREATE privilege lets the first run or `dblock init` make them"
                         : "the dblock tables do not exist and no CREATE privilege is seen, so `dblock init` needs a DBA"};
    if (!failed.empty()) return {"privileges", false, "insert/update/delete on the dblock tables failed: " + failed};
    check.detail = can_create ? "create, insert, update and delete on the dblock tables"
                              : "insert, update and delete work; no CREATE privilege seen, so `dblock init` needs a DBA";
    return check;
  }

  DoctorCheck check_wait_timeout() {
    auto r = conn_->execute("SELECT @@GLOBAL.wait_timeout, @@SESSION.wait_timeout");
    if (!r) return {"wait_timeout", false, r.error().message};
    const auto global = to_i64(r->rows.at(0).at(0));
    const auto session = to_i64(r->rows.at(0).at(1));
    if (session < 31536000)
      return {"wait_timeout", false,
              "the server kept wait_timeout at " + std::to_string(session) + " s for dblock's session: an idle holder may be dropped"};
    return {"wait_timeout", true,
            "server wait_timeout is " + std::to_string(global) +
                " s; dblock sets its own: a lock holder's session 2 x TTL + 5 s (its renewals keep it busy; a holder "
                "cut off from the server loses the lock after that), its other sessions a year"};
  }

  // status reads holders through IS_USED_LOCK, which every account sees; `release --force`
  // waits for the ended session to leave PROCESSLIST, where without the PROCESS privilege an
  // account sees only its own sessions (and KILL ends only those without more privileges).
  DoctorCheck check_processlist() {
    auto r = conn_->execute("SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES WHERE PRIVILEGE_TYPE = 'PROCESS'");
    if (!r) return {"processlist", false, r.error().message};
    if (to_i64(r->rows.at(0).at(0)) > 0)
      return {"processlist", true, "PROCESS privilege: release --force can see every holder's session end"};
    return {"processlist", true,
            "no PROCESS privilege: release --force sees and ends only this account's sessions, so use one account "
            "on every host"};
  }

  DoctorCheck check_galera(Strategy strategy) {
    auto r = conn_->execute("SELECT @@GLOBAL.wsrep_on, @@GLOBAL.wsrep_sync_wait");
    // MySQL without Galera has no such variable: not a cluster.
    const bool galera = r && !r->rows.empty() && (r->rows[0][0] == "1" || r->rows[0][0] == "ON");
    if (!galera) return {"galera", true, "not a Galera cluster (wsrep_on is off or absent)"};
    // Replication is synchronous (certification): a node killed loses no grant. wsrep_sync_wait
    // makes a node's reads wait for what the cluster committed; dblock's conditional writes
    // are certified whatever it says.
    const std::string mode = "Galera cluster (wsrep_on=ON, synchronous replication, wsrep_sync_wait=" +
                             r->rows[0][1].value_or("?") + ")";
    if (strategy == Strategy::lease) return {"galera", true, mode + ": the lease strategy is safe here"};
    return {"galera", false,
            mode + ": GET_LOCK and FOR UPDATE are not cluster-wide, so " +
                std::string(to_string(strategy)) + " is unsafe; use --strategy lease"};
  }

  Dsn dsn_;
  std::shared_ptr<Session> session_;  // shared with the lease and ShedLock lockers (make_locker)
  Connection* conn_;                  // session_'s, for the doctor's checks
  Tables t_;
};

Result<std::unique_ptr<Backend>> open(const Dsn& dsn, const BackendOptions& options) {
  auto conn = Connection::open(dsn, options);
  if (!conn) return std::unexpected(conn.error());
  return std::unique_ptr<Backend>(std::make_unique<MysqlBackend>(dsn, options, std::move(*conn)));
}

}  // namespace
}  // namespace dblock::mysql

namespace dblock {

BackendEntry mysql_backend_entry() {
  return BackendEntry{
      mysql::descriptor,
      [](const BackendOptions& options) { return sql::schema_sql(mysql::schema_statements(options)); },
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

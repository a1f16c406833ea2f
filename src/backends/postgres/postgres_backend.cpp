// PostgreSQL via libpq: every strategy. Status, history, stateless renew/release and doctor
// live here; the lockers in postgres_lease.cpp and postgres_session_strategies.cpp.
#include <nlohmann/json.hpp>

#include <map>

#include "backends/common/lock_rows.hpp"
#include "backends/postgres/postgres_dsn.hpp"
#include "backends/postgres/postgres_tables.hpp"
#include "backends/registry.hpp"
#include "core/clock.hpp"

namespace dblock {
namespace {

using postgres::Param;
using postgres::Params;
using postgres::Connection;
using postgres::ms;
using rows::describe;

class PostgresBackend final : public Backend {
 public:
  PostgresBackend(Dsn dsn, BackendOptions options, std::shared_ptr<Connection> conn)
      : dsn_(std::move(dsn)), options_(std::move(options)), conn_(std::move(conn)), t_(postgres::tables_for(options_.table_prefix)) {}

  std::string_view name() const override { return "postgres"; }

  Result<void> ensure_schema() override { return postgres::ensure_schema(*conn_, t_); }

  Result<std::unique_ptr<Locker>> make_locker(Strategy s) override {
    if (s == Strategy::lease) return postgres::make_lease_locker(conn_, t_, options_.history_keep);
    return postgres::make_session_locker(s, conn_, dsn_, options_, t_);
  }

  Result<std::vector<LockStatus>> status(std::span<const std::string> keys) override {
    Param filter;
    if (!keys.empty()) filter = nlohmann::json(std::vector<std::string>(keys.begin(), keys.end())).dump();
    auto r = conn_->exec(postgres::status_select(t_) +
                             " WHERE $2::jsonb IS NULL OR name IN (SELECT jsonb_array_elements_text($2::jsonb)) ORDER BY name",
                         {t_.claims, filter});
    if (!r) return std::unexpected(r.error());
    std::vector<LockStatus> found;
    for (int i = 0; i < r->rows(); ++i) found.push_back(postgres::read_status(*r, i, t_));
    return rows::in_request_order(std::move(found), keys, [this] { return now_ms(); });
  }

  Result<std::vector<RunRecord>> history(const std::string& key, int limit) override {
    return postgres::read_history(*conn_, t_, key, limit);
  }

  Result<std::int64_t> renew(const std::string& key, const HolderSelector& who, Millis ttl) override {
    auto r = conn_->exec("UPDATE " + t_.locks +
                             " SET expires_at = now() + $4::bigint * interval '1 ms', renewed_at = now() "
                             "WHERE name = $1 AND ($2::text IS NULL OR owner = $2) AND ($3::bigint IS NULL OR token = $3::bigint) "
                             "AND released_at IS NULL AND strategy = 'lease' RETURNING " + ms("expires_at"),
                         {key, selector_owner(who), selector_token(who), postgres::ms_param(ttl)});
    if (!r) return std::unexpected(r.error());
    if (r->rows() == 0) return fail(ErrorKind::lost, "'" + key + "' is not held by " + describe(who));
    return r->int64(0, 0);
  }

  Result<void> release(const std::string& key, const HolderSelector& who) override {
    // Truncated, not rounded into timestamptz(3): the lock must read free right after release.
    auto r = conn_->exec("WITH u AS (UPDATE " + t_.locks +
                             " SET released_at = now(), expires_at = LEAST(expires_at, date_trunc('milliseconds', now())) "
                             "WHERE name = $1 AND ($4::boolean OR (released_at IS NULL "
                             "AND ($2::text IS NULL OR owner = $2) AND ($3::bigint IS NULL OR token = $3::bigint))) "
                             "RETURNING name) SELECT pg_notify($5, u.name)::text FROM u",
                         {key, selector_owner(who), selector_token(who), who.force ? "true" : "false", t_.channel});
    if (!r) return std::unexpected(r.error());
    if (r->rows() == 0 && !who.force) return fail(ErrorKind::lost, "'" + key + "' is not held by " + describe(who));
    return {};
  }

  Result<std::int64_t> now_ms() override {
    auto r = conn_->exec("SELECT " + ms("clock_timestamp()"));
    if (!r) return std::unexpected(r.error());
    return r->int64(0, 0);
  }

  std::vector<DoctorCheck> doctor_checks(Strategy strategy) override {
    std::vector<DoctorCheck> out;
    auto add = [&out](std::string name, bool ok, std::string detail) {
      out.push_back(DoctorCheck{std::move(name), ok, std::move(detail)});
    };
    auto v = conn_->exec(
        "SELECT current_setting('server_version'), "
        "COALESCE((SELECT setting || COALESCE(unit, '') FROM pg_settings WHERE name = 'idle_session_timeout'), 'n/a'), "
        "(SELECT setting || COALESCE(unit, '') FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'), "
        "pg_backend_pid()");
    if (!v) {
      add("server", false, v.error().message);
      return out;
    }
    add("server", true, "PostgreSQL " + v->text(0, 0) + " at " + dsn_.redacted);
    add("idle_timeouts", true,
        "idle_session_timeout=" + v->text(0, 1) + ", idle_in_transaction_session_timeout=" + v->text(0, 2) +
            "; dblock sets its own: a lock holder's session 2 x TTL + 5 s (its renewals keep it busy; a holder cut "
            "off from the server loses the lock after that), its other sessions 0 (none)");
    auto again = conn_->exec("SELECT pg_backend_pid()");
    if (!again) {
      add("pgbouncer", false, again.error().message);
    } else if (again->int64(0, 0) != v->int64(0, 3)) {
      bool session = is_session_strategy(strategy);
      add("pgbouncer", !session,
          "the server process changed between two statements (transaction pooling, e.g. PgBouncer): "
          "advisory, for-update and txn-insert are unsafe here; use lease or a session-pooled/direct DSN");
    } else {
      add("pgbouncer", true, "same server process across statements: session strategies are safe");
    }
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
  static Param selector_owner(const HolderSelector& who) { return who.owner ? Param(*who.owner) : Param(); }
  static Param selector_token(const HolderSelector& who) {
    return who.token ? Param(std::to_string(*who.token)) : Param();
  }

  Dsn dsn_;
  BackendOptions options_;
  std::shared_ptr<Connection> conn_;
  postgres::Tables t_;
};

}  // namespace

BackendEntry postgres_backend_entry() {
  return BackendEntry{
      "postgres",
      {"postgres", "postgresql"},
      {Strategy::lease, Strategy::advisory, Strategy::for_update, Strategy::txn_insert},
      [](const std::string& prefix) { return postgres::schema_sql(prefix); },
      &postgres::check_postgres_dsn,
      [](const Dsn& dsn, const BackendOptions& options) -> Result<std::unique_ptr<Backend>> {
        auto conn = Connection::open(dsn, options);
        if (!conn) return std::unexpected(conn.error());
        return std::unique_ptr<Backend>(
            std::make_unique<PostgresBackend>(dsn, options, std::shared_ptr<Connection>(std::move(*conn))));
      },
  };
}

}  // namespace dblock

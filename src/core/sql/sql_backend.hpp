#pragma once
// The Backend (backend.hpp) once for every dialect: the schema, the lease and ShedLock lockers,
// status, history, slot counts, `dblock renew`, `dblock release` and the clock, all on the
// dialect's Session and statements, and doctor's checks of a server. A dialect's Backend adds
// only what is its own: its session (and when it opens one again, or a second one), and its
// session strategies' locker.

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "core/sql/statements.hpp"

namespace dblock::sql {

/// A family of statements, given whole or as the function that builds it on first use: a run
/// uses the lease's (or ShedLock's), `status` the inspection's, and building every family's
/// text for each process was a tenth of a millisecond of a SQLite run (docs/performance.md).
/// Not locked: a Backend is used by one thread (its lockers copy what they need).
template <class T>
class Statements {
 public:
  Statements(T built) : built_(std::move(built)) {}  // NOLINT: a family given whole converts
  Statements(std::function<T()> build) : build_(std::move(build)) {}  // NOLINT: so does its builder
  const T& get() const {
    if (!built_) built_.emplace(build_());
    return *built_;
  }

 private:
  std::function<T()> build_;
  mutable std::optional<T> built_;
};

class SqlBackend : public Backend {
 public:
  /// `name`: the descriptor's; the statements are the dialect's for `options`.
  SqlBackend(std::string_view name, BackendOptions options, Statements<LeaseStatements> lease,
             Statements<ShedlockStatements> shedlock, Statements<InspectStatements> inspect, SchemaStatements schema,
             Statements<ReleaseStatements> release, DoctorStatements doctor = {});

  std::string_view name() const override { return name_; }
  Result<void> ensure_schema() override;
  Result<void> check_schema() override;
  /// lease (dblock's table or ShedLock's) here, on session() and shared with it; the session
  /// strategies from make_session_locker.
  Result<std::unique_ptr<Locker>> make_locker(Strategy strategy) override;
  Result<std::vector<LockStatus>> status(std::span<const std::string> keys) override;
  Result<int> slot_count(const std::string& key) override;
  Result<std::vector<RunRecord>> history(const std::string& key, int limit) override;
  Result<std::int64_t> renew(const std::string& key, const HolderSelector& who, Millis ttl) override;
  Result<std::int64_t> now_ms() override;
  /// The server, the privileges (a probe rolled back), the dialect's own checks
  /// (DoctorStatements::checks), the pooler (pooler.hpp) and the failover record.
  std::vector<DoctorCheck> doctor_checks(Strategy strategy) override;
  /// ShedLock's rows here; dblock's from release_held. Naming no holder without --force is
  /// ErrorKind::usage.
  Result<void> release(const std::string& key, const HolderSelector& who) final;

 protected:
  /// The Backend's session (its schema set: schema()), shared with the lease lockers.
  virtual Result<std::shared_ptr<Session>> session() = 0;
  /// advisory, for-update, txn-insert; ErrorKind::config naming what the dialect can do.
  virtual Result<std::unique_ptr<Locker>> make_session_locker(Strategy strategy) = 0;
  /// What the failover record's read also says (FailoverStatements::read: who serves the session
  /// and whether it is a Galera node), judged before a session strategy's first take: refused
  /// where its lock could not hold (pooler.hpp, session_strategy_answered), at no statement of
  /// its own (make_session_locker's `serving`). `open_other` opens a second session (another_session), the locker may
  /// outlive this Backend.
  failover::ReadCheck serving_check(Strategy strategy,
                                    std::function<Result<std::unique_ptr<Session>>()> open_other) const;

  /// A session of its own on the same database, for doctor's pooler check (pooler.hpp).
  virtual Result<std::unique_ptr<Session>> another_session() {
    return fail(ErrorKind::internal, "no second session here");
  }

  /// What a new session is given to repair and check (Session::set_schema).
  const std::shared_ptr<const SchemaStatements>& schema() const { return schema_; }
  /// Inspection creates nothing: a failure that may come from a missing table or column is
  /// explained by check_schema (no_lock_database, or the foreign shape); any other stands.
  std::unexpected<Error> explained(Session& session, const Error& failed);

  BackendOptions options_;
  Statements<InspectStatements> inspect_;

 private:
  /// `dblock release` of dblock's row from another process (Backend::release), on the
  /// ReleaseStatements: marks the row released and, when a session strategy holds it, ends the
  /// holder's session and returns once that session is gone and the lock free (within the I/O
  /// timeout); a key the named holder does not hold is ErrorKind::lost, unless --force.
  Result<void> release_held(const std::string& key, const HolderSelector& who);
  DoctorCheck check_privileges(Session& session, Strategy strategy);
  /// After an inspection failed: the InspectStatements::older of the tables' shape when the
  /// failure is a missing column and a table lacks a required added one; else nullopt.
  std::optional<InspectStatements> older_statements(Session& session, const Error& failed);

  std::string_view name_;
  Statements<LeaseStatements> lease_;
  Statements<ShedlockStatements> shedlock_;
  Statements<ReleaseStatements> release_;
  DoctorStatements doctor_;
  std::shared_ptr<const SchemaStatements> schema_;
};

}  // namespace dblock::sql

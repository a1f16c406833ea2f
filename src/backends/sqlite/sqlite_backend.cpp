// The SQLite backend: one host's coordinator (local cron, containers sharing a volume, CI).
// Only the lease strategy: SQLite has no sessions another process could see die. There is no
// server clock: SQLite's 'now' is each process's own wall clock, which NTP, a VM resume or
// `date -s` can step by hours. So leases and --min-interval are judged on CLOCK_BOOTTIME
// (with the boot id, as that clock restarts at every boot), read in SQL through
// dblock_boot_ms() / dblock_boot_id(); the wall-clock columns stay for display and history.
// Every comparison is in integer milliseconds computed in SQL.

#include <sys/statfs.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

#include "backends/registry.hpp"
#include "backends/sqlite/sqlite_connection.hpp"
#include "backends/sqlite/sqlite_dsn.hpp"
#include "backends/sqlite/sqlite_tables.hpp"

namespace dblock {
namespace {

using sqlite::Connection;
using sqlite::Statement;
using sqlite::Transaction;
using sqlite::epoch_ms_sql;
using sqlite::now_plus_sql;
using sqlite::now_sql;
using sqlite::quote_ident;

constexpr const char* only_lease =
    "the sqlite backend supports only the lease strategy; advisory, for-update and txn-insert need a "
    "mysql:// or postgres:// DSN";

/// Database now in epoch ms, as SQL text.
std::string now_ms_sql() { return epoch_ms_sql(now_sql()); }

/// SQL: true when the boot_* columns of the row (`a` is "" or an alias with its dot) judge its
/// lease: they belong to its current token (an older dblock that took the row left them stale)
/// and both the row and this process know their boot.
std::string boot_judged_sql(const std::string& a) {
  return "(" + a + "boot_token IS " + a + "token AND " + a + "boot_id IS NOT NULL AND dblock_boot_id() IS NOT NULL)";
}

/// SQL, 1 or 0: the row's lease is live. On CLOCK_BOOTTIME when the boot columns judge it; a
/// lease from another boot is over (its holder did not survive the reboot). A row without them
/// (an older dblock's, or a host without a boot id) falls back to the wall clock, the only rule
/// its writer knew, so a holder still running an older dblock keeps its lease.
std::string lease_live_sql(const std::string& a) {
  return "COALESCE(CASE WHEN " + boot_judged_sql(a) + " THEN " + a + "boot_id = dblock_boot_id() AND " + a +
         "boot_expires_ms > dblock_boot_ms() ELSE " + epoch_ms_sql(a + "expires_at") + " > " + now_ms_sql() +
         " END, 0)";
}

/// SQL: milliseconds since the row's last start, for --min-interval. CLOCK_BOOTTIME within one
/// boot; across a reboot only the wall clock spans the gap.
std::string started_ago_sql(const std::string& a) {
  return "(CASE WHEN " + boot_judged_sql(a) + " AND " + a + "boot_id = dblock_boot_id() AND " + a +
         "boot_started_ms IS NOT NULL THEN dblock_boot_ms() - " + a + "boot_started_ms ELSE " + now_ms_sql() + " - " +
         epoch_ms_sql(a + "last_started_at") + " END)";
}

/// SQL SET list for a renewal by the holder: the boot columns now belong to this boot and token.
/// The start keeps its boot reading only when it was taken on this boot.
std::string renew_boot_sql(std::string_view ttl_param) {
  return "boot_started_ms = CASE WHEN " + boot_judged_sql("") +
         " AND boot_id = dblock_boot_id() THEN boot_started_ms END, boot_id = dblock_boot_id(),"
         " boot_token = token, boot_expires_ms = dblock_boot_ms() + " +
         std::string(ttl_param);
}

/// The columns read_status() expects, in its order; `extra` is appended after them.
std::string status_select(const std::string& locks_table, std::string_view extra = {}) {
  std::string sql = "SELECT name, owner, host, pid, token, strategy, " + epoch_ms_sql("acquired_at") + ", " +
                    epoch_ms_sql("renewed_at") + ", " + epoch_ms_sql("expires_at") + ", " +
                    epoch_ms_sql("released_at") + ", " + epoch_ms_sql("last_started_at") + ", " +
                    epoch_ms_sql("last_finished_at") + ", last_exit_code, " + now_ms_sql() + ", " +
                    lease_live_sql("");
  if (!extra.empty()) sql += ", " + std::string(extra);
  return sql + " FROM " + locks_table;
}
constexpr int status_column_count = 15;

/// The state rules of src/backends/README.md for a lease row; `live` from lease_live_sql.
/// Acquisition clears released_at, so a set one belongs to this lease: no comparison of two
/// wall-clock readings that a step between them could put in the wrong order.
LockStatus::State state_of(const LockStatus& s, bool live) {
  if (live) return LockStatus::State::held;
  if (!s.acquired_at_ms) return LockStatus::State::free;
  if (s.released_at_ms) return LockStatus::State::free;
  return LockStatus::State::expired;
}

LockStatus read_status(const Statement& row) {
  LockStatus s;
  s.key = row.text(0);
  s.owner = row.text(1);
  s.host = row.text(2);
  s.pid = row.is_null(3) ? 0 : row.int64(3);
  s.token = row.int64(4);
  s.strategy = row.text(5);
  s.acquired_at_ms = row.opt_int64(6);
  s.renewed_at_ms = row.opt_int64(7);
  s.expires_at_ms = row.opt_int64(8);
  s.released_at_ms = row.opt_int64(9);
  s.last_started_at_ms = row.opt_int64(10);
  s.last_finished_at_ms = row.opt_int64(11);
  if (auto code = row.opt_int64(12)) s.last_exit_code = static_cast<int>(*code);
  s.db_now_ms = row.int64(13);
  s.state = state_of(s, row.int64(14) != 0);
  return s;
}

struct Tables {
  explicit Tables(const std::string& prefix)
      : locks(quote_ident(prefix + "locks")), runs(quote_ident(prefix + "runs")) {}
  std::string locks;
  std::string runs;
};

/// Inserts one history row and prunes the key's rows beyond `keep`, inside the caller's transaction.
Result<void> record_run(const Connection& conn, const Tables& tables, int keep, const RunRecord& run,
                        const std::string& started_at) {
  auto insert = conn.prepare("INSERT INTO " + tables.runs +
                             " (name, token, owner, host, pid, strategy, started_at, finished_at, outcome, exit_code)"
                             " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, " +
                             now_sql() + ", ?8, ?9)");
  if (!insert) return std::unexpected(insert.error());
  insert->bind(1, std::string_view(run.key));
  insert->bind(2, run.token);
  insert->bind(3, std::string_view(run.owner));
  insert->bind(4, std::string_view(run.host));
  insert->bind(5, run.pid);
  insert->bind(6, std::string_view(run.strategy));
  if (started_at.empty()) insert->bind_null(7);
  else insert->bind(7, std::string_view(started_at));
  insert->bind(8, to_string(run.outcome));
  if (run.exit_code) insert->bind(9, static_cast<std::int64_t>(*run.exit_code));
  else insert->bind_null(9);
  if (auto ok = insert->run("recording the run of " + run.key); !ok) return ok;

  // The row at offset `keep` (newest first) is the newest one to go; everything older goes too.
  auto prune = conn.prepare("DELETE FROM " + tables.runs + " WHERE name = ?1 AND id <= (SELECT id FROM " +
                            tables.runs + " WHERE name = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)");
  if (!prune) return std::unexpected(prune.error());
  prune->bind(1, std::string_view(run.key));
  prune->bind(2, static_cast<std::int64_t>(keep < 0 ? 0 : keep));
  return prune->run("pruning the history of " + run.key);
}

class SqliteLocker final : public Locker {
 public:
  SqliteLocker(Connection conn, const BackendOptions& options)
      : conn_(std::move(conn)), tables_(options.table_prefix), history_keep_(options.history_keep) {}

  Result<AcquireOutcome> try_acquire(const LockRequest& req, Millis) override {
    if (held_) return fail(ErrorKind::internal, "this locker already holds " + held_->key);
    const std::string now = now_sql();
    auto tx = Transaction::begin_immediate(conn_, "acquiring " + req.key);
    if (!tx) return std::unexpected(tx.error());

    auto upsert = conn_.prepare(
        "INSERT INTO " + tables_.locks +
        " AS l (name, owner, host, pid, token, strategy, session_id, acquired_at, renewed_at, expires_at,"
        " released_at, last_started_at, boot_id, boot_token, boot_started_ms, boot_expires_ms) VALUES (?1, ?2, ?3,"
        " ?4, 1, 'lease', NULL, " +
        now + ", " + now + ", " + now_plus_sql("?5") + ", NULL, " + now +
        ", dblock_boot_id(), 1, dblock_boot_ms(), dblock_boot_ms() + ?5"
        ") ON CONFLICT(name) DO UPDATE SET owner = excluded.owner, host = excluded.host, pid = excluded.pid,"
        " token = l.token + 1, strategy = excluded.strategy, session_id = NULL,"
        " acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at,"
        " expires_at = excluded.expires_at, released_at = NULL, last_started_at = excluded.last_started_at,"
        " boot_id = excluded.boot_id, boot_token = l.token + 1, boot_started_ms = excluded.boot_started_ms,"
        " boot_expires_ms = excluded.boot_expires_ms"
        " WHERE NOT " +
        lease_live_sql("l.") + " AND (?6 <= 0 OR l.last_started_at IS NULL OR " + started_ago_sql("l.") +
        " >= ?6) RETURNING token, " + epoch_ms_sql("acquired_at") + ", " + epoch_ms_sql("expires_at") +
        ", acquired_at");
    if (!upsert) return std::unexpected(upsert.error());
    upsert->bind(1, std::string_view(req.key));
    upsert->bind(2, std::string_view(req.owner));
    upsert->bind(3, std::string_view(req.host));
    upsert->bind(4, req.pid);
    upsert->bind(5, static_cast<std::int64_t>(req.ttl.count()));
    upsert->bind(6, static_cast<std::int64_t>(req.min_interval.count()));
    auto row = upsert->step("acquiring " + req.key);
    if (!row) return std::unexpected(row.error());

    AcquireOutcome out;
    if (*row) {
      out.state = AcquireOutcome::State::acquired;
      out.token = upsert->int64(0);
      out.acquired_at_ms = upsert->opt_int64(1);
      out.expires_at_ms = upsert->opt_int64(2);
      Held held{{req.key, req.owner, req.host, req.pid, out.token}, upsert->text(3)};
      if (auto done = upsert->run("acquiring " + req.key); !done) return std::unexpected(done.error());
      if (auto ok = tx->commit("committing the acquisition of " + req.key); !ok) return std::unexpected(ok.error());
      held_ = std::move(held);
      return out;
    }

    // Cold path: say who holds it, or when --min-interval will have elapsed.
    const std::string due_in_sql =
        "CASE WHEN ?2 > 0 AND last_started_at IS NOT NULL THEN ?2 - " + started_ago_sql("") + " END";
    auto read = conn_.prepare(status_select(tables_.locks, due_in_sql) +
                              " WHERE name = ?1");
    if (!read) return std::unexpected(read.error());
    read->bind(1, std::string_view(req.key));
    read->bind(2, static_cast<std::int64_t>(req.min_interval.count()));
    auto found = read->step("reading the holder of " + req.key);
    if (!found) return std::unexpected(found.error());
    out.state = AcquireOutcome::State::busy;
    if (*found) {
      LockStatus holder = read_status(*read);
      auto due_in = read->opt_int64(status_column_count);
      if (holder.state != LockStatus::State::held && due_in && *due_in > 0) {
        out.state = AcquireOutcome::State::not_due;
        out.due_in = Millis(*due_in);
      } else {
        out.holder = std::move(holder);
      }
    }
    return out;  // the transaction changed nothing; its guard rolls it back
  }

  Result<void> renew(Millis ttl) override {
    if (!held_ || lost_) return fail(ErrorKind::lost, "no lock is held, so there is nothing to renew");
    auto stmt = conn_.prepare("UPDATE " + tables_.locks + " SET expires_at = " + now_plus_sql("?4") +
                              ", renewed_at = " + now_sql() + ", " + renew_boot_sql("?4") +
                              " WHERE name = ?1 AND owner = ?2 AND token = ?3 AND released_at IS NULL RETURNING 1");
    if (!stmt) return std::unexpected(stmt.error());
    stmt->bind(1, std::string_view(held_->key));
    stmt->bind(2, std::string_view(held_->owner));
    stmt->bind(3, held_->token);
    stmt->bind(4, static_cast<std::int64_t>(ttl.count()));
    auto row = stmt->step("renewing " + held_->key);
    if (!row) return std::unexpected(row.error());
    if (!*row) {
      Error lost{ErrorKind::lost, "the lock " + held_->key + " (token " + std::to_string(held_->token) +
                                      ") is no longer held by " + held_->owner +
                                      ": it expired and was taken, or was released"};
      // Kept (not reset): release() still has to write this run's history row.
      lost_ = true;
      return std::unexpected(std::move(lost));
    }
    return stmt->run("renewing " + held_->key);
  }

  Result<void> release(const ReleaseRequest& req) override {
    if (!held_) return fail(ErrorKind::lost, "no lock is held, so there is nothing to release");
    // A copy: after a transient error the caller may retry, so held_ stays until the end.
    const Held held = *held_;
    auto tx = Transaction::begin_immediate(conn_, "releasing " + held.key);
    if (!tx) return std::unexpected(tx.error());
    if (lost_) return record_lost_run(*tx, held, req);

    const std::string now = now_sql();
    auto stmt = conn_.prepare(
        "UPDATE " + tables_.locks + " SET released_at = " + now + ", expires_at = CASE WHEN " +
        epoch_ms_sql("acquired_at") + " + ?4 > " + now_ms_sql() +
        " THEN strftime('%Y-%m-%d %H:%M:%f', julianday(acquired_at) + ?4 / 86400000.0) ELSE " + now +
        " END, boot_expires_ms = MAX(dblock_boot_ms(), boot_started_ms + ?4), last_finished_at = CASE WHEN ?5 THEN " +
        now + " ELSE last_finished_at END," +
        " last_exit_code = CASE WHEN ?5 THEN ?6 ELSE last_exit_code END" +
        " WHERE name = ?1 AND owner = ?2 AND token = ?3 AND released_at IS NULL RETURNING 1");
    if (!stmt) return std::unexpected(stmt.error());
    stmt->bind(1, std::string_view(held.key));
    stmt->bind(2, std::string_view(held.owner));
    stmt->bind(3, held.token);
    stmt->bind(4, static_cast<std::int64_t>(req.min_hold.count()));
    stmt->bind(5, static_cast<std::int64_t>(req.finished_run ? 1 : 0));
    if (req.exit_code) stmt->bind(6, static_cast<std::int64_t>(*req.exit_code));
    else stmt->bind_null(6);
    auto row = stmt->step("releasing " + held.key);
    if (!row) return std::unexpected(row.error());
    const bool released = *row;
    if (auto done = stmt->run("releasing " + held.key); !done) return done;

    // The run happened even when the lock was lost meanwhile: its history row is still written.
    if (auto ok = record_history(held, req, released); !ok) return ok;
    if (auto ok = tx->commit("committing the release of " + held.key); !ok) return ok;
    held_.reset();
    if (!released)
      return fail(ErrorKind::lost, "the lock " + held.key + " (token " + std::to_string(held.token) +
                                       ") was no longer held by " + held.owner + " when it was released");
    return {};
  }

 private:
  struct Held;

  Result<void> record_history(const Held& held, const ReleaseRequest& req, bool still_held) {
    if (!req.history) return {};
    RunRecord run = complete_run_record(*req.history, held, "lease", still_held);
    return record_run(conn_, tables_, history_keep_, run, held.acquired_at);
  }

  // renew() saw the lock gone: the row belongs to someone else now, so only the history is written.
  Result<void> record_lost_run(Transaction& tx, const Held& held, const ReleaseRequest& req) {
    if (auto ok = record_history(held, req, false); !ok) return ok;
    if (auto ok = tx.commit("recording the lost run of " + held.key); !ok) return ok;
    held_.reset();
    lost_ = false;
    return fail(ErrorKind::lost, "the lock " + held.key + " (token " + std::to_string(held.token) +
                                     ") was lost before it was released");
  }

  struct Held : HeldLock {
    std::string acquired_at;  // as stored, for the history row's started_at
  };

  Connection conn_;
  Tables tables_;
  int history_keep_;
  std::optional<Held> held_;
  bool lost_ = false;  // renew() found the lock taken or released; held_ stays for the history row
};

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
      : conn_(std::move(conn)), options_(options), tables_(options.table_prefix) {}

  std::string_view name() const override { return "sqlite"; }

  Result<void> ensure_schema() override { return sqlite::ensure_schema(conn_, options_.table_prefix); }

  Result<std::unique_ptr<Locker>> make_locker(Strategy strategy) override {
    if (strategy != Strategy::lease) return fail(ErrorKind::config, only_lease);
    // A connection of its own, so a heartbeat never lands inside another caller's transaction.
    auto conn = Connection::open(conn_.path(), options_.io_timeout);
    if (!conn) return std::unexpected(conn.error());
    return std::make_unique<SqliteLocker>(std::move(*conn), options_);
  }

  Result<std::vector<LockStatus>> status(std::span<const std::string> keys) override {
    std::vector<LockStatus> out;
    if (keys.empty()) {
      auto stmt = conn_.prepare(status_select(tables_.locks) + " ORDER BY name");
      if (!stmt) return std::unexpected(stmt.error());
      for (;;) {
        auto row = stmt->step("reading the locks");
        if (!row) return std::unexpected(row.error());
        if (!*row) return out;
        out.push_back(read_status(*stmt));
      }
    }
    auto stmt = conn_.prepare(status_select(tables_.locks) + " WHERE name = ?1");
    if (!stmt) return std::unexpected(stmt.error());
    for (const std::string& key : keys) {
      stmt->reset();
      stmt->bind(1, std::string_view(key));
      auto row = stmt->step("reading the lock " + key);
      if (!row) return std::unexpected(row.error());
      if (*row) {
        out.push_back(read_status(*stmt));
        continue;
      }
      LockStatus never_taken;
      never_taken.key = key;
      auto now = now_ms();
      if (!now) return std::unexpected(now.error());
      never_taken.db_now_ms = *now;
      out.push_back(std::move(never_taken));
    }
    return out;
  }

  Result<std::vector<RunRecord>> history(const std::string& key, int limit) override {
    auto stmt = conn_.prepare("SELECT id, name, token, owner, host, pid, strategy, " + epoch_ms_sql("started_at") +
                              ", " + epoch_ms_sql("finished_at") + ", outcome, exit_code FROM " + tables_.runs +
                              " WHERE (?1 = '' OR name = ?1) ORDER BY id DESC LIMIT ?2");
    if (!stmt) return std::unexpected(stmt.error());
    stmt->bind(1, std::string_view(key));
    stmt->bind(2, static_cast<std::int64_t>(limit > 0 ? limit : -1));
    std::vector<RunRecord> out;
    for (;;) {
      auto row = stmt->step("reading the history");
      if (!row) return std::unexpected(row.error());
      if (!*row) return out;
      RunRecord r;
      r.id = stmt->int64(0);
      r.key = stmt->text(1);
      r.token = stmt->int64(2);
      r.owner = stmt->text(3);
      r.host = stmt->text(4);
      r.pid = stmt->is_null(5) ? 0 : stmt->int64(5);
      r.strategy = stmt->text(6);
      r.started_at_ms = stmt->is_null(7) ? 0 : stmt->int64(7);
      r.finished_at_ms = stmt->opt_int64(8);
      r.outcome = parse_run_outcome(stmt->text(9)).value_or(RunOutcome::failed);
      if (auto code = stmt->opt_int64(10)) r.exit_code = static_cast<int>(*code);
      out.push_back(std::move(r));
    }
  }

  Result<std::int64_t> renew(const std::string& key, const HolderSelector& who, Millis ttl) override {
    if (!who.owner && !who.token) return fail(ErrorKind::usage, "renew needs the holder's owner or token");
    auto stmt = conn_.prepare("UPDATE " + tables_.locks + " SET expires_at = " + now_plus_sql("?4") +
                              ", renewed_at = " + now_sql() + ", " + renew_boot_sql("?4") +
                              " WHERE name = ?1 AND released_at IS NULL AND (?2 IS NULL OR owner = ?2)"
                              " AND (?3 IS NULL OR token = ?3) RETURNING " +
                              epoch_ms_sql("expires_at"));
    if (!stmt) return std::unexpected(stmt.error());
    stmt->bind(1, std::string_view(key));
    stmt->bind(2, who.owner);
    stmt->bind(3, who.token);
    stmt->bind(4, static_cast<std::int64_t>(ttl.count()));
    auto row = stmt->step("renewing " + key);
    if (!row) return std::unexpected(row.error());
    if (!*row) return fail(ErrorKind::lost, "the lock " + key + " is not held by " + describe(who));
    std::int64_t expires = stmt->int64(0);
    if (auto done = stmt->run("renewing " + key); !done) return std::unexpected(done.error());
    return expires;
  }

  Result<void> release(const std::string& key, const HolderSelector& who) override {
    if (!who.force && !who.owner && !who.token)
      return fail(ErrorKind::usage, "release needs the holder's owner or token, or --force");
    const std::string now = now_sql();
    // --force also cuts short a --min-hold that a finished holder left behind.
    auto stmt = conn_.prepare("UPDATE " + tables_.locks + " SET released_at = " + now + ", expires_at = " + now +
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

  Result<std::int64_t> now_ms() override {
    auto stmt = conn_.prepare("SELECT " + now_ms_sql());
    if (!stmt) return std::unexpected(stmt.error());
    auto row = stmt->step("reading the database clock");
    if (!row) return std::unexpected(row.error());
    return stmt->int64(0);
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
  static std::string describe(const HolderSelector& who) {
    std::string text;
    if (who.owner) text = "owner " + *who.owner;
    if (who.token) text += (text.empty() ? "" : " with ") + std::string("token ") + std::to_string(*who.token);
    return text;
  }

  DoctorCheck check_writable() {
    const std::string& path = conn_.path();
    const std::string dir = directory_of(path);
    if (::access(path.c_str(), W_OK) != 0)
      return {"privileges", false, "the database file " + path + " is not writable: " + std::strerror(errno)};
    if (::access(dir.c_str(), W_OK) != 0)
      return {"privileges", false,
              "the directory " + dir + " is not writable (SQLite creates its -wal and -shm files there): " +
                  std::strerror(errno)};
    if (sqlite3_db_readonly(conn_.get(), "main") == 1)
      return {"privileges", false, "SQLite opened " + path + " read-only"};
    auto tx = Transaction::begin_immediate(conn_, "taking the write lock");
    if (!tx) return {"privileges", false, tx.error().message};
    return {"privileges", true, "the database file " + path + " is writable"};
  }

  DoctorCheck check_journal_mode() {
    auto mode = conn_.journal_mode();
    if (!mode) return {"journal_mode", false, mode.error().message};
    if (*mode == "wal") return {"journal_mode", true, "the journal mode is WAL"};
    return {"journal_mode", false,
            "the journal mode is " + *mode +
                ", not WAL: writers block readers (the file system may lack the shared memory WAL needs)"};
  }

  DoctorCheck check_filesystem() {
    const std::string dir = directory_of(conn_.path());
    struct statfs fs{};
    if (::statfs(dir.c_str(), &fs) != 0)
      return {"filesystem", false, "cannot inspect the file system of " + dir + ": " + std::strerror(errno)};
    const auto magic = static_cast<unsigned long>(fs.f_type) & 0xFFFFFFFFUL;
    for (const auto& nfs : network_filesystems)
      if (nfs.magic == magic)
        return {"filesystem", false,
                conn_.path() + " is on a " + nfs.name +
                    " file system, where SQLite's file locks are unreliable: use a local disk, or a mysql:// "
                    "or postgres:// DSN to coordinate several hosts"};
    return {"filesystem", true, conn_.path() + " is on a local file system"};
  }

  Connection conn_;
  BackendOptions options_;
  Tables tables_;
};

Result<std::unique_ptr<Backend>> open_sqlite(const Dsn& dsn, const BackendOptions& options) {
  auto path = sqlite::database_path(dsn);
  if (!path) return std::unexpected(path.error());
  auto conn = Connection::open(*path, options.io_timeout);
  if (!conn) return std::unexpected(conn.error());
  return std::make_unique<SqliteBackend>(std::move(*conn), options);
}

}  // namespace

BackendEntry sqlite_backend_entry() {
  return BackendEntry{
      "sqlite",
      {"sqlite"},
      {Strategy::lease},
      &sqlite::schema_sql,
      [](const Dsn& dsn) -> Result<void> {
        if (auto path = sqlite::database_path(dsn); !path) return std::unexpected(path.error());
        return {};
      },
      &open_sqlite,
  };
}

}  // namespace dblock

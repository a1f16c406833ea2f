// The lease strategy on SQLite: one BEGIN IMMEDIATE transaction acquires (a conditional
// upsert that bumps the token), one owner- and token-checked update renews or releases. Leases
// and --min-interval are judged on CLOCK_BOOTTIME (sqlite_tables.hpp).

#include <sys/inotify.h>
#include <unistd.h>

#include <array>
#include <utility>

#include "backends/sqlite/sqlite_tables.hpp"
#include "core/semaphore.hpp"

namespace dblock::sqlite {
namespace {

/// SQL: milliseconds since the row's last start, for --min-interval. CLOCK_BOOTTIME within one
/// boot; across a reboot only the wall clock spans the gap.
std::string started_ago_sql(const std::string& a) {
  return "(CASE WHEN " + boot_judged_sql(a) + " AND " + a + "boot_id = dblock_boot_id() AND " + a +
         "boot_started_ms IS NOT NULL THEN dblock_boot_ms() - " + a + "boot_started_ms ELSE " + now_ms_sql() + " - " +
         epoch_ms_sql(a + "last_started_at") + " END)";
}

}  // namespace

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

namespace {
/// Wakes a waiter without polling: every commit appends to the database's write-ahead log
/// (<db>-wal, kept between runs), so a change to that file means a release may have happened.
/// Other keys' commits wake it too; each costs one attempt. Without the file (or inotify) the
/// waiter falls back to core's backoff.
class WalWatch {
 public:
  explicit WalWatch(std::string wal_path) : wal_path_(std::move(wal_path)) {}
  WalWatch(const WalWatch&) = delete;
  WalWatch& operator=(const WalWatch&) = delete;
  ~WalWatch() {
    if (fd_ >= 0) ::close(fd_);
  }

  int fd() {
    if (fd_ < 0 && !failed_) {
      fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
      if (fd_ >= 0 && ::inotify_add_watch(fd_, wal_path_.c_str(), IN_MODIFY) < 0) {
        ::close(fd_);
        fd_ = -1;
      }
      failed_ = fd_ < 0;
    }
    return fd_;
  }

  void drain() {
    std::array<char, 4096> events;
    while (fd_ >= 0 && ::read(fd_, events.data(), events.size()) > 0) {
    }
  }

 private:
  std::string wal_path_;
  int fd_ = -1;
  bool failed_ = false;
};

class LeaseLocker final : public Locker {
 public:
  LeaseLocker(std::shared_ptr<const Connection> conn, const BackendOptions& options)
      : conn_(std::move(conn)),
        prefix_(options.table_prefix),
        tables_(options.table_prefix),
        history_keep_(options.history_keep),
        wal_watch_(conn_->path() + "-wal") {}

  Result<AcquireOutcome> try_acquire(const LockRequest& req, Millis) override {
    return with_schema([&] { return attempt_acquire(req); });
  }

  Result<void> renew(Millis ttl) override {
    return with_schema([&] { return attempt_renew(ttl); });
  }

  Result<void> release(const ReleaseRequest& req) override {
    return with_schema([&] { return attempt_release(req); });
  }

  // Created on first use: only a run that waits pays for the watch.
  int wakeup_fd() const override { return wal_watch_.fd(); }
  void consume_wakeup() override { wal_watch_.drain(); }

 private:
  struct Held;

  /// The run path assumes the tables (backend.hpp, make_locker): an operation that failed
  /// because one is missing (or lacks a column an upgrade adds) is retried once after the
  /// schema is created. Each attempt's transaction has rolled back by the time it returns.
  template <class Attempt>
  auto with_schema(Attempt attempt) -> decltype(attempt()) {
    auto first = attempt();
    if (first) return first;
    auto repaired = repair_schema(*conn_, prefix_, first.error());
    if (!repaired) return std::unexpected(repaired.error());
    if (!*repaired) return first;
    return attempt();
  }

  Result<AcquireOutcome> attempt_acquire(const LockRequest& req) {
    if (held_) return fail(ErrorKind::internal, "this locker already holds " + held_->key);
    const std::string now = now_sql();
    auto tx = Transaction::begin_immediate(*conn_, "acquiring " + req.key);
    if (!tx) return std::unexpected(tx.error());

    auto upsert = conn_->prepare(
        "INSERT INTO " + tables_.locks +
        " AS l (name, owner, host, pid, token, strategy, session_id, acquired_at, renewed_at, expires_at,"
        " released_at, last_started_at, boot_id, boot_token, boot_started_ms, boot_expires_ms) VALUES (?1, ?2, ?3,"
        " ?4, COALESCE(?7, 1), 'lease', NULL, " +
        now + ", " + now + ", " + now_plus_sql("?5") + ", NULL, " + now +
        ", dblock_boot_id(), COALESCE(?7, 1), dblock_boot_ms(), dblock_boot_ms() + ?5"
        ") ON CONFLICT(name) DO UPDATE SET owner = excluded.owner, host = excluded.host, pid = excluded.pid,"
        " token = COALESCE(?7, l.token + 1), strategy = excluded.strategy, session_id = NULL,"
        " acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at,"
        " expires_at = excluded.expires_at, released_at = NULL, last_started_at = excluded.last_started_at,"
        " boot_id = excluded.boot_id, boot_token = COALESCE(?7, l.token + 1), boot_started_ms = excluded.boot_started_ms,"
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
    // A semaphore's slot: the header first, in this transaction; its token is the slot's.
    if (!req.semaphore.empty()) {
      auto header = take_header(req);
      if (!header) return std::unexpected(header.error());
      if (header->state != AcquireOutcome::State::acquired) return *header;
      upsert->bind(7, header->token);
    } else {
      upsert->bind_null(7);
    }
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
    auto read = conn_->prepare(status_select(tables_, due_in_sql) +
                              " WHERE name = ?1");
    if (!read) return std::unexpected(read.error());
    read->bind(1, std::string_view(req.key));
    read->bind(2, static_cast<std::int64_t>(req.min_interval.count()));
    auto found = read->step("reading the holder of " + req.key);
    if (!found) return std::unexpected(found.error());
    out.state = AcquireOutcome::State::busy;
    if (*found) {
      LockStatus holder = read_status(*read);
      auto due_in = read->opt_int64(status_columns);
      if (holder.state != LockStatus::State::held && due_in && *due_in > 0) {
        out.state = AcquireOutcome::State::not_due;
        out.due_in = Millis(*due_in);
      } else {
        out.holder = std::move(holder);
      }
    }
    return out;  // the transaction changed nothing; its guard rolls it back
  }

  /// The header row of req.semaphore, inside the acquiring transaction (src/backends/README.md,
  /// Semaphores): acquired with the token the slot gets, or the answer to give (another slot
  /// count recorded, or a plain holder of the key).
  Result<AcquireOutcome> take_header(const LockRequest& req) {
    const std::string now = now_sql();
    const std::string slot_held = "EXISTS (SELECT 1 FROM " + tables_.locks +
                                  " AS s WHERE s.name > ?6 AND s.name < ?7 AND s.released_at IS NULL AND"
                                  " (s.strategy IS NOT 'lease' OR " + lease_live_sql("s.") + "))";
    auto header = conn_->prepare(
        "INSERT INTO " + tables_.locks +
        " AS l (name, owner, host, pid, token, strategy, session_id, acquired_at, renewed_at, expires_at,"
        " released_at, last_started_at, slots) VALUES (?1, ?2, ?3, ?4, 1, 'semaphore', NULL, " + now + ", " + now +
        ", '9999-12-31 23:59:59.999', NULL, " + now + ", ?5) ON CONFLICT(name) DO UPDATE SET owner = excluded.owner,"
        " host = excluded.host, pid = excluded.pid, token = l.token + 1, strategy = 'semaphore', session_id = NULL,"
        " acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at, expires_at = excluded.expires_at,"
        " released_at = NULL, last_started_at = excluded.last_started_at, slots = excluded.slots, boot_id = NULL,"
        " boot_token = NULL, boot_started_ms = NULL, boot_expires_ms = NULL"
        " WHERE CASE WHEN l.slots IS NULL THEN l.released_at IS NOT NULL OR l.acquired_at IS NULL OR"
        " (l.strategy IS 'lease' AND NOT " + lease_live_sql("l.") + ") ELSE l.slots = ?5 OR NOT " + slot_held +
        " END RETURNING token");
    if (!header) return std::unexpected(header.error());
    const std::string first = req.semaphore + slot_separator, past = req.semaphore + char(slot_separator + 1);
    header->bind(1, std::string_view(req.semaphore));
    header->bind(2, std::string_view(req.owner));
    header->bind(3, std::string_view(req.host));
    header->bind(4, req.pid);
    header->bind(5, static_cast<std::int64_t>(req.slots));
    header->bind(6, std::string_view(first));
    header->bind(7, std::string_view(past));
    auto row = header->step("taking the semaphore " + req.semaphore);
    if (!row) return std::unexpected(row.error());
    AcquireOutcome out;
    if (*row) {
      out.state = AcquireOutcome::State::acquired;
      out.token = header->int64(0);
      if (auto done = header->run("taking the semaphore " + req.semaphore); !done) return std::unexpected(done.error());
      return out;
    }
    // Not taken: another slot count, or a plain holder of the key.
    auto read = conn_->prepare(status_select(tables_, "slots") + " WHERE name = ?1");
    if (!read) return std::unexpected(read.error());
    read->bind(1, std::string_view(req.semaphore));
    auto found = read->step("reading the semaphore " + req.semaphore);
    if (!found) return std::unexpected(found.error());
    out.state = AcquireOutcome::State::busy;
    if (*found) {
      auto recorded = read->opt_int64(status_columns);
      if (recorded && *recorded != req.slots) out.recorded_slots = static_cast<int>(*recorded);
      else out.holder = read_status(*read);
    }
    return out;
  }

  Result<void> attempt_renew(Millis ttl) {
    if (!held_ || lost_) return fail(ErrorKind::lost, "no lock is held, so there is nothing to renew");
    auto stmt = conn_->prepare("UPDATE " + tables_.locks + " SET expires_at = " + now_plus_sql("?4") +
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

  Result<void> attempt_release(const ReleaseRequest& req) {
    if (!held_) return fail(ErrorKind::lost, "no lock is held, so there is nothing to release");
    // A copy: after a transient error the caller may retry, so held_ stays until the end.
    const Held held = *held_;
    auto tx = Transaction::begin_immediate(*conn_, "releasing " + held.key);
    if (!tx) return std::unexpected(tx.error());
    if (lost_) return record_lost_run(*tx, held, req);

    const std::string now = now_sql();
    auto stmt = conn_->prepare(
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

  Result<void> record_history(const Held& held, const ReleaseRequest& req, bool still_held) {
    if (!req.history) return {};
    RunRecord run = complete_run_record(*req.history, held, "lease", still_held);
    return record_run(*conn_, tables_, history_keep_, run, held.acquired_at);
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

  std::shared_ptr<const Connection> conn_;
  std::string prefix_;
  Tables tables_;
  int history_keep_;
  mutable WalWatch wal_watch_;
  std::optional<Held> held_;
  bool lost_ = false;  // renew() found the lock taken or released; held_ stays for the history row
};

}  // namespace

std::unique_ptr<Locker> make_lease_locker(std::shared_ptr<const Connection> conn, const BackendOptions& options) {
  return std::make_unique<LeaseLocker>(std::move(conn), options);
}

}  // namespace dblock::sqlite

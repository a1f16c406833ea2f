// The session strategies' server lock on MariaDB/MySQL (sql::SessionLock; the token, history,
// semaphores and --min-interval are common/session_locker.cpp's), held by a connection of its
// own (the lock session):
//  advisory    GET_LOCK on the key's hashed name (advisory_name)
//  for-update  SELECT ... FOR UPDATE of the key's <prefix>claims row, in a transaction held open
//              under READ COMMITTED (no gap locks)
//  txn-insert  an uncommitted INSERT of that row under READ COMMITTED; others wait on the primary
//              key until the holder rolls back
// The row-lock strategies also keep a holder tag (holder_tag) while they hold the key, which is
// what status and `release --force` ask the server about: their row records "<id>:<tag>", and a
// connection id alone proves nothing (the server hands ids out again after a restart).
//
// The row-lock strategies wait in whole seconds only (innodb_lock_wait_timeout; 0 is "no wait"
// on MariaDB, and for-update says NOWAIT), so a slice under a second is answered at once and the
// rest of it is spent on the bookkeeping session's wake queue (WakeQueue), as a lease waiter's.
// GET_LOCK waits for any fraction of a second itself: advisory needs no wake-ups.
#include <algorithm>
#include <cstdio>
#include <random>

#include "backends/common/session_locker.hpp"
#include "backends/mysql/mysql_tables.hpp"

namespace dblock::mysql {
namespace {

// `label` + the first `digits` hex digits of SHA-256 over database, prefix and key, then `tag`:
// one key's GET_LOCK names, 64 characters at most (the server's limit). All parts as bytes: a
// key's UTF-8 must not meet the database name's collation. Status and `release --force` read
// the same names from a row (mysql_statements.cpp, holder_lock).
Sql hashed_name(const Tables& t, std::string_view label, int digits, std::string_view key, std::string_view tag = {}) {
  Sql q("CONCAT('" + std::string(label) + "', LEFT(SHA2(CONCAT(CAST(DATABASE() AS BINARY), 0x00, CAST(? AS BINARY), 0x00,"
        " CAST(? AS BINARY)), 256), " + std::to_string(digits) + ")",
        t.prefix, key);
  if (!tag.empty()) q.add(", ?", tag);
  return q.add(")");
}

// "dblock:" + 57 hex digits: any valid key fits, and two databases on one server never share a
// lock.
Sql advisory_name(const Tables& t, std::string_view key) { return hashed_name(t, "dblock:", 57, key); }

// The name a for-update or txn-insert holder keeps while it holds the key: "dblock-held:" + 20
// hex digits of the key's hash + `tag`, the lock session's 32 random hex digits. The server
// shows who holds it (IS_USED_LOCK), so status and `release --force` find the holder from the
// server's lock state, not from a connection id; and the name holds the key's hash, so a tag
// copied from another key's row names nothing anyone holds.
Sql holder_tag(const Tables& t, std::string_view key, std::string_view tag) {
  return hashed_name(t, "dblock-held:", 20, key, tag);
}

}  // namespace

// The wake queue's names and its waits (WakeQueue, mysql_connection.cpp).
Sql wake_name(const Tables& t, std::string_view key) { return hashed_name(t, "dblock-wake:", 52, key); }

Sql queue_name(const Tables& t, std::string_view key) { return hashed_name(t, "dblock-queue:", 51, key); }

Sql release_wake(const Tables& t, std::string_view key) {
  return Sql("DO RELEASE_LOCK(").add(wake_name(t, key)).add("), RELEASE_LOCK(").add(queue_name(t, key)).add(")");
}

Result<void> leave_queue(Connection& conn, const Tables& t, std::string_view key) {
  auto r = conn.execute(Sql("DO RELEASE_LOCK(").add(queue_name(t, key)).add(")"));
  if (!r) return std::unexpected(r.error());
  return {};
}

Result<bool> wait_for_wake(Connection& conn, const Tables& t, std::string_view key, Millis left) {
  const double seconds = static_cast<double>(std::min<std::int64_t>(left.count(), conn.max_block_ms())) / 1000.0;
  // GET_LOCK is re-entrant (a second hold needs a second release), so the queue name is asked
  // for only when this session does not hold it already. CASE evaluates one branch. The head
  // that was not woken gives the queue name back: its wait is over (core calls again, and it
  // queues again), and a semaphore waiter, which waits on another slot each time, must not
  // keep the queue of one it then does not take.
  Sql q("SELECT CASE WHEN IS_USED_LOCK(n.q) <=> CONNECTION_ID() "
        "THEN CASE WHEN IS_USED_LOCK(n.w) IS NOT NULL AND COALESCE(GET_LOCK(n.w, ?), 0) = 1 THEN 1 "
        "ELSE 0 * COALESCE(RELEASE_LOCK(n.q), 0) END "
        "ELSE COALESCE(GET_LOCK(n.q, ?), 0) = 1 END, RELEASE_LOCK(n.w) FROM (SELECT ",
        seconds, seconds);
  q.add(queue_name(t, key)).add(" AS q, ").add(wake_name(t, key)).add(" AS w) n");
  auto r = conn.execute(q);
  if (!r) return std::unexpected(r.error());
  return r->rows.at(0).at(0) == "1";
}

namespace {

// 128 random bits as 32 hex digits, new with every lock session.
std::string random_tag() {
  std::random_device rd;
  std::string out;
  for (int i = 0; i < 4; ++i) {
    char part[9];
    std::snprintf(part, sizeof part, "%08x", static_cast<unsigned>(rd()));
    out += part;
  }
  return out;
}

class MysqlSessionLock final : public sql::SessionLock {
 public:
  MysqlSessionLock(Strategy s, Dsn dsn, BackendOptions options, std::shared_ptr<Session> book)
      : strategy_(s), kind_(to_string(s)), dsn_(std::move(dsn)), options_(std::move(options)),
        t_(make_tables(options_.table_prefix)), book_(std::move(book)) {}

  Result<void> open() {
    conn_.reset();
    tagged_.reset();
    // The row-lock strategies start with no lock wait (core's slices are under a second), set
    // with the connection rather than by a SET before the first attempt.
    auto c = Connection::open(dsn_, options_, ConnectionRole::lock_holder,
                              row_lock() ? ", SESSION innodb_lock_wait_timeout = 0" : "");
    if (!c) return std::unexpected(c.error());
    // No gap locks: under REPEATABLE READ a for-update take of a key whose claims row is not
    // there yet locks the gap around it, and the INSERT of a neighbouring key (txn-insert's
    // lock, for-update's claims row) reads busy meanwhile. A second inserter of the same key
    // waits on the first one's row.
    if (row_lock())
      if (auto r = (*c)->query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"); !r) return r;
    conn_ = std::move(*c);
    lock_wait_s_ = 0;
    tag_ = random_tag();
    return {};
  }

  Result<bool> take(const std::string& key, Millis wait) override {
    if (!conn_) return gone();
    // A wait longer than the read timeout would look like a dead server: core calls again.
    const std::int64_t wait_ms = std::clamp<std::int64_t>(wait.count(), 0, conn_->max_block_ms());
    if (strategy_ == Strategy::advisory) return take_advisory(key, wait_ms);
    // Whole seconds only, never longer than asked.
    if (auto r = set_lock_wait(wait_ms / 1000); !r) return std::unexpected(r.error());
    return strategy_ == Strategy::for_update ? take_row(key) : insert_row(key);
  }

  Result<bool> holds(const std::string& key) override {
    if (!conn_) return gone();
    Result<Outcome> r;
    if (strategy_ == Strategy::advisory)
      r = conn_->execute(Sql("SELECT IS_USED_LOCK(").add(advisory_name(t_, key)).add(") <=> CONNECTION_ID()"));
    else if (strategy_ == Strategy::txn_insert)
      // The uncommitted row is visible to its own transaction only, while it is open.
      r = conn_->execute(Sql("SELECT COUNT(*) FROM " + t_.claims + " WHERE name = ? AND kind = ?", key, kind_));
    else
      // The row lock lasts as long as the transaction, which lasts as long as the session.
      r = conn_->execute("SELECT 1");
    if (!r) return std::unexpected(r.error());
    return r->rows.at(0).at(0) == "1";
  }

  Result<void> give_back(const std::string& key) override {
    if (!conn_) return gone();
    if (strategy_ == Strategy::advisory) {
      auto r = conn_->execute(Sql("SELECT RELEASE_LOCK(").add(advisory_name(t_, key)).add(")"));
      if (!r) return std::unexpected(r.error());
      if (r->rows.at(0).at(0) != "1") return fail(ErrorKind::lost, "GET_LOCK was not held");
      return {};
    }
    // The lock first, then the tag, which goes with it: a session that kept the tag could be
    // taken for the key's holder (by status, until the session closes).
    auto rolled_back = conn_->query("ROLLBACK");
    Result<void> untagged;
    if (tagged_) {
      if (auto r = conn_->execute(Sql("DO RELEASE_LOCK(").add(holder_tag(t_, *tagged_, tag_)).add(")")); !r)
        untagged = std::unexpected(r.error());
      tagged_.reset();
    }
    return rolled_back ? untagged : rolled_back;
  }

  // What status and `release --force` find the holder by (holder_of_row): advisory's lock name
  // holds the key, so the connection id goes with it; the row locks' go with the holder tag.
  std::string session_id() const override {
    const std::string id = conn_ ? std::to_string(conn_->session_id()) : "0";
    return strategy_ == Strategy::advisory ? id : id + ":" + tag_;
  }

  int socket() const override { return conn_ ? conn_->socket() : -1; }

  Result<void> reopen() override { return open(); }

  sql::ReleaseSignal& release_signal() override { return row_lock() ? book_->release_signal() : no_signal_; }

 private:
  bool row_lock() const { return strategy_ != Strategy::advisory; }

  static std::unexpected<Error> gone() { return fail(ErrorKind::connection, "the lock session is closed"); }

  Result<bool> take_advisory(const std::string& key, std::int64_t wait_ms) {
    // GET_LOCK is re-entrant on one connection: refuse rather than "succeed" twice.
    Sql q("SELECT IF(IS_USED_LOCK(");
    q.add(advisory_name(t_, key)).add(") <=> CONNECTION_ID(), NULL, GET_LOCK(").add(advisory_name(t_, key));
    auto r = conn_->execute(q.add(", ?))", static_cast<double>(wait_ms) / 1000.0));
    if (!r) return std::unexpected(r.error());
    const Value& v = r->rows.at(0).at(0);
    if (!v) return fail(ErrorKind::internal, "GET_LOCK for '" + key + "' is already held by this connection");
    return *v == "1";
  }

  // for-update: the claims row exists after the key's first for-update run, so it is locked
  // straight away; only a missing one is inserted (committed) and locked again. INSERT IGNORE
  // of a row a racer inserted meanwhile waits for its holder's lock, within the same lock wait,
  // and then means busy.
  Result<bool> take_row(const std::string& key) {
    for (int pass = 0; pass < 2; ++pass) {
      if (auto r = conn_->query("START TRANSACTION"); !r) return std::unexpected(r.error());
      // The holder tag in the same statement, once the row is locked (the select list is
      // evaluated for a locked row only; none when busy or missing).
      Sql lock("SELECT name, GET_LOCK(");
      lock.add(holder_tag(t_, key, tag_)).add(", 0) FROM " + t_.claims + " WHERE name = ? AND kind = ? FOR UPDATE", key, kind_);
      auto locked = conn_->execute(lock.add(lock_wait_s_ > 0 ? "" : " NOWAIT"));
      if (!locked || !locked->rows.empty()) return settle(locked, key);
      if (auto r = conn_->query("ROLLBACK"); !r) return std::unexpected(r.error());
      auto r = conn_->execute(Sql("INSERT IGNORE INTO " + t_.claims + " (name, kind) VALUES (?, ?)", key, kind_));
      if (!r && r.error().kind == ErrorKind::busy) return false;
      if (!r) return std::unexpected(r.error());
    }
    return false;  // the row vanished again: core tries again
  }

  // txn-insert: the claims row inserted and left uncommitted, then the holder tag.
  Result<bool> insert_row(const std::string& key) {
    if (auto r = conn_->query("START TRANSACTION"); !r) return std::unexpected(r.error());
    auto inserted = conn_->execute(Sql("INSERT INTO " + t_.claims + " (name, kind) VALUES (?, ?)", key, kind_));
    if (inserted)
      if (auto r = conn_->execute(Sql("DO GET_LOCK(").add(holder_tag(t_, key, tag_)).add(", 0)")); !r) inserted = std::unexpected(r.error());
    return settle(inserted, key);
  }

  // After the locking statement of a row-lock strategy: taken, the holder tag with it; busy or
  // failed, the transaction is rolled back and nothing is held.
  Result<bool> settle(const Result<Outcome>& locked, const std::string& key) {
    if (locked) {
      tagged_ = key;
      return true;
    }
    if (locked.error().kind == ErrorKind::connection) return std::unexpected(locked.error());
    (void)conn_->query("ROLLBACK");
    if (locked.error().kind == ErrorKind::busy) return false;
    return std::unexpected(locked.error());
  }

  Result<void> set_lock_wait(std::int64_t seconds) {
    if (lock_wait_s_ == seconds) return {};
    if (auto r = conn_->execute(Sql("SET SESSION innodb_lock_wait_timeout = ?", seconds)); !r)
      return std::unexpected(r.error());
    lock_wait_s_ = seconds;
    return {};
  }

  Strategy strategy_;
  std::string kind_;  // the claims row's kind
  Dsn dsn_;
  BackendOptions options_;
  Tables t_;
  std::shared_ptr<Session> book_;      // its wake queue is the row-lock strategies' release signal
  std::unique_ptr<Connection> conn_;   // the lock session
  std::int64_t lock_wait_s_ = 0;       // the session's innodb_lock_wait_timeout
  std::string tag_;                    // the lock session's random tag (holder_tag)
  std::optional<std::string> tagged_;  // the key whose holder tag the lock session holds
  sql::ReleaseSignal no_signal_;
};

}  // namespace

Result<std::unique_ptr<sql::SessionLock>> make_session_lock(Strategy s, const Dsn& dsn, const BackendOptions& options,
                                                            std::shared_ptr<Session> book) {
  auto lock = std::make_unique<MysqlSessionLock>(s, dsn, options, std::move(book));
  if (auto r = lock->open(); !r) return std::unexpected(r.error());
  return std::unique_ptr<sql::SessionLock>(std::move(lock));
}

}  // namespace dblock::mysql

// The session strategies' server lock on MariaDB/MySQL (sql::SessionLock), held by a connection
// of its own (the lock session): advisory GET_LOCK on the key's hashed name; for-update SELECT ...
// FOR UPDATE of the key's <prefix>claims row in a transaction held open; txn-insert an
// uncommitted INSERT of that row. The row locks keep a holder tag while they hold the key.
//
// The row locks wait in whole seconds only (innodb_lock_wait_timeout), so a slice under a second
// is answered at once and the rest of it is spent on the bookkeeping session's wake queue.
// GET_LOCK waits for any fraction of a second itself: advisory needs no wake-ups.
#include <algorithm>
#include <cstdio>
#include <random>

#include "backends/mysql/mysql_tables.hpp"
#include "core/sql/session_locker.hpp"

namespace dblock::mysql {
namespace {

// 128 random bits as 32 hex digits, new with every lock session.
std::string random_tag() {
  std::random_device rd;
  char tag[33];
  std::snprintf(tag, sizeof tag, "%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  return tag;
}

class MysqlSessionLock final : public sql::SessionLock {
 public:
  MysqlSessionLock(Strategy s, Dsn dsn, BackendOptions options, std::shared_ptr<Session> book)
      : strategy_(s), kind_(to_string(s)), dsn_(std::move(dsn)), options_(std::move(options)),
        s_(lock_statements(options_.table_prefix)), book_(std::move(book)) {}

  Result<void> reopen() override {
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
    if (strategy_ == Strategy::advisory) {
      auto r = conn_->run(s_.advisory_take, {{"key", key}, {"wait_ms", wait_ms}});
      if (!r) return std::unexpected(r.error());
      if ((*r)[0].is_null(0)) return fail(ErrorKind::internal, "GET_LOCK for '" + key + "' is already held by this connection");
      return (*r)[0].text(0) == "1";
    }
    // Whole seconds only, never longer than asked.
    if (lock_wait_s_ != wait_ms / 1000) {
      if (auto r = conn_->run(s_.lock_wait, {{"seconds", wait_ms / 1000}}); !r) return std::unexpected(r.error());
      lock_wait_s_ = wait_ms / 1000;
    }
    return strategy_ == Strategy::for_update ? take_row(key) : insert_row(key);
  }

  Result<bool> holds(const std::string& key) override {
    if (!conn_) return gone();
    const sql::Statement& proof = strategy_ == Strategy::advisory     ? s_.advisory_holds
                                  : strategy_ == Strategy::txn_insert ? s_.holds_claim
                                                                      : s_.alive;
    auto r = conn_->run(proof, params(key));
    if (!r) return std::unexpected(r.error());
    return (*r)[0].text(0) == "1";
  }

  Result<void> give_back(const std::string& key) override {
    if (!conn_) return gone();
    if (strategy_ == Strategy::advisory) {
      auto r = conn_->run(s_.advisory_give_back, {{"key", key}});
      if (!r) return std::unexpected(r.error());
      if ((*r)[0].text(0) != "1") return fail(ErrorKind::lost, "GET_LOCK was not held");
      return {};
    }
    // The lock first, then the tag, which goes with it: a session that kept the tag could be
    // taken for the key's holder (by status, until the session closes).
    auto rolled_back = conn_->query("ROLLBACK");
    Result<void> untagged;
    if (tagged_) {
      if (auto r = conn_->run(s_.untag, params(*tagged_)); !r) untagged = std::unexpected(r.error());
      tagged_.reset();
    }
    return rolled_back ? untagged : rolled_back;
  }

  // What status and `release --force` find the holder by (holder_lock in mysql_statements.cpp):
  // advisory's lock name holds the key, so the connection id goes with it; the row locks' go
  // with the holder tag.
  std::string session_id() const override {
    const std::string id = conn_ ? std::to_string(conn_->session_id()) : "0";
    return strategy_ == Strategy::advisory ? id : id + ":" + tag_;
  }

  int socket() const override { return conn_ ? conn_->socket() : -1; }

  sql::ReleaseSignal& release_signal() override { return row_lock() ? book_->release_signal() : no_signal_; }

 private:
  bool row_lock() const { return strategy_ != Strategy::advisory; }

  static std::unexpected<Error> gone() { return fail(ErrorKind::connection, "the lock session is closed"); }

  sql::Params params(const std::string& key) const { return {{"key", key}, {"kind", kind_}, {"tag", tag_}}; }

  // for-update: the claims row exists after the key's first for-update run, so it is locked
  // straight away; only a missing one is inserted (committed) and locked again. INSERT IGNORE
  // of a row a racer inserted meanwhile waits for its holder's lock, within the same lock wait,
  // and then means busy.
  Result<bool> take_row(const std::string& key) {
    for (int pass = 0; pass < 2; ++pass) {
      if (auto r = conn_->query("START TRANSACTION"); !r) return std::unexpected(r.error());
      auto locked = conn_->run(lock_wait_s_ > 0 ? s_.lock_claim : s_.lock_claim_nowait, params(key));
      if (!locked || !locked->empty()) return settle(locked, key);
      if (auto r = conn_->query("ROLLBACK"); !r) return std::unexpected(r.error());
      auto r = conn_->run(s_.make_claim, params(key));
      if (!r && r.error().kind == ErrorKind::busy) return false;
      if (!r) return std::unexpected(r.error());
    }
    return false;  // the row vanished again: core tries again
  }

  // txn-insert: the claims row inserted and left uncommitted, then the holder tag.
  Result<bool> insert_row(const std::string& key) {
    if (auto r = conn_->query("START TRANSACTION"); !r) return std::unexpected(r.error());
    auto inserted = conn_->run(s_.insert_claim, params(key));
    if (inserted)
      if (auto r = conn_->run(s_.tag, params(key)); !r) inserted = std::unexpected(r.error());
    return settle(inserted, key);
  }

  // After the locking statement of a row-lock strategy: taken, the holder tag with it; busy or
  // failed, the transaction is rolled back and nothing is held.
  Result<bool> settle(const Result<sql::Rows>& locked, const std::string& key) {
    if (locked) {
      tagged_ = key;
      return true;
    }
    if (locked.error().kind == ErrorKind::connection) return std::unexpected(locked.error());
    (void)conn_->query("ROLLBACK");
    if (locked.error().kind == ErrorKind::busy) return false;
    return std::unexpected(locked.error());
  }

  Strategy strategy_;
  std::string kind_;  // the claims row's
  Dsn dsn_;
  BackendOptions options_;
  LockStatements s_;
  std::shared_ptr<Session> book_;      // its wake queue is the row-lock strategies' release signal
  std::unique_ptr<Connection> conn_;   // the lock session
  std::int64_t lock_wait_s_ = 0;       // the session's innodb_lock_wait_timeout
  std::string tag_;                    // the lock session's random tag
  std::optional<std::string> tagged_;  // the key whose holder tag the lock session holds
  sql::ReleaseSignal no_signal_;
};

}  // namespace

Result<std::unique_ptr<sql::SessionLock>> make_session_lock(Strategy s, const Dsn& dsn, const BackendOptions& options,
                                                            std::shared_ptr<Session> book) {
  auto lock = std::make_unique<MysqlSessionLock>(s, dsn, options, std::move(book));
  if (auto r = lock->reopen(); !r) return std::unexpected(r.error());
  return std::unique_ptr<sql::SessionLock>(std::move(lock));
}

}  // namespace dblock::mysql

// The holder session of the session strategies (core/sql/session_locker.hpp) on MariaDB/MySQL,
// which runs the statements of lock_statements (mysql_statements.cpp): advisory GET_LOCK on the
// key's hashed name, in the bookkeeping session itself (a named lock outlives every commit, so
// one connection both holds it and numbers the row; on MariaDB one statement does both); for-update
// and txn-insert the key's <prefix>claims row, their transaction held open, with a holder tag
// while they hold, on a connection of their own (a transaction that a holder killed mid-way
// cannot roll the bookkeeping back).
//
// The row locks wait in whole seconds only (innodb_lock_wait_timeout), so a slice under a second
// is answered at once and the rest of it is spent on the bookkeeping session's waiters' queue:
// the waiter at its head waits for the holder's wake name here, in the lock session, with its
// lock statement behind that wait in one block (send_behind), so the holder's end lets it lock
// in the wake's round trip.
// GET_LOCK waits for any fraction of a second itself: advisory needs no wake-ups.
#include <algorithm>
#include <cstdio>
#include <future>
#include <optional>
#include <random>
#include <system_error>
#include <utility>
#include <variant>

#include "backends/mysql/mysql_names.hpp"
#include "backends/mysql/mysql_tables.hpp"

namespace dblock::mysql {
namespace {

class MysqlHolder final : public sql::HolderSession {
 public:
  MysqlHolder(Strategy s, Dsn dsn, BackendOptions options, std::shared_ptr<Session> book,
              std::unique_ptr<Connection> opened, const sql::LockStatements& st)
      : strategy_(s), row_lock_(s != Strategy::advisory), dsn_(std::move(dsn)), options_(std::move(options)), book_(std::move(book)),
        opened_(std::move(opened)), gate_take_(st.gate_take), gate_wait_(st.gate_wait), gate_give_(st.gate_give),
        grant_wait_(st.grant_wait) {}

  // A lock statement sent behind a wait (send_behind) runs in one block with it, begin's lock
  // wait (and txn-insert's INSERT) between the two; one sent with a numbering (send_numbering)
  // gives the numbering gate back after it, in its block, and sends the numbering now.
  Result<sql::Rows> run(const sql::Statement& st, const sql::Params& p, Millis) override {
    if (!conn_) return fail(ErrorKind::connection, "the lock session is closed");
    auto wait = std::exchange(behind_, std::nullopt);
    const bool chained = start_numbering();
    sql::Params q = p;
    if (chained) q.set("gate", gate());
    Result<sql::Rows> r = std::unexpected(Error{ErrorKind::internal, "not run"});
    if (!wait) {
      r = conn_->run(st, q);
    } else {
      sql::Rows waited;
      r = conn_->run_behind(wait->first, st, q.set(wait->second), waited);
      told_ = waited.empty() ? sql::AheadAnswer::untold : sql::ahead_answer(waited);
    }
    if (chained) settle_numbering(r, wait.has_value());
    return r;
  }
  // MariaDB: the numbering (LockStatements::row_numbered, core's: session.take once the server
  // shows this session holding the key's holder tag) goes on the bookkeeping session, in the
  // lock statement's round trip, behind a wait for the numbering gate: a named lock of this
  // session's own (its tag's), which it takes before its first such lock statement and gives
  // back in the lock statement's block, right after the lock statement (and the tag after
  // txn-insert's INSERT): skipped when that fails, so the gate opens once the lock is granted,
  // when the session ends, or when settle_numbering lets it go. The numbering's wait lasts as
  // long as the lock statement's block may wait (the wait it goes behind, then the row's), and
  // the numbering runs after it either way: it proves the grant itself, and numbers nothing
  // when it runs too early or the session is gone (core then numbers as before). The two
  // sessions answer on their own connections, the numbering's read on a thread of its own
  // meanwhile (the client's blocking calls wait on one connection each).
  Result<void> send_numbering(const sql::Statement& st, const sql::Params& p, Millis wait, const sql::Statement& number,
                              const sql::Params& np, bool before_tag) override {
    numbered_.reset();
    refusal_read_.reset();
    numbering_.reset();
    auto plain = [&] { return before_tag ? send_before_tag(st, p, wait) : send(st, p, wait); };
    // The numbering's proof: this session (:lock_session) holding its holder tag (:held), named
    // here as lock.claim names it in the server (SessionLock::tag); a name spelled otherwise
    // (another DATABASE()) is held by nobody, and the numbering then numbers nothing.
    sql::Params n = np;
    if (conn_)
      if (const auto* key = np.find("key"); key && std::holds_alternative<std::string>(*key))
        n.set("held", held_name(conn_->database(), options_.table_prefix, std::get<std::string>(*key), tag_))
            .set("lock_session", static_cast<std::int64_t>(conn_->session_id()));
    // A first attempt's (chains_first): no gate; the numbering goes behind lock.grant_wait.
    if (const auto* poll = np.find("poll_ms"); poll && std::holds_alternative<std::int64_t>(*poll) &&
                                               std::get<std::int64_t>(*poll) > 0) {
      if (chains_first()) numbering_ = Numbering{number, n, true};
      return plain();
    }
    std::int64_t ahead_ms = 0;  // the wait the lock statement goes behind (send_behind)
    if (behind_)
      if (const auto* v = behind_->second.find("wait_ms"); v && std::holds_alternative<std::int64_t>(*v))
        ahead_ms = std::get<std::int64_t>(*v);
    const std::int64_t gate_ms = std::min<std::int64_t>(ahead_ms + wait.count(), book_->connection().max_block_ms());
    if (gate_take_.empty() || !conn_ || !conn_->mariadb() || gate_ms <= 0 || book_->connection().socket() < 0)
      return plain();
    // Taken in a round trip of its own the first time, so that the numbering's wait cannot reach
    // the server first; kept from then on (settle_numbering), so once per session until a grant.
    if (!gate_held_) {
      auto taken = conn_->run(gate_take_, gate_params());
      if (!taken) return std::unexpected(taken.error());
      gate_held_ = !taken->empty() && (*taken)[0].opt_int64(0).value_or(0) == 1;
      if (!gate_held_) return plain();
    }
    // The gate's wait (:wait_ms, GET_LOCK's bound) is bound with the numbering it goes ahead of,
    // which reads no :wait_ms of its own.
    numbering_ = Numbering{number, n.set("gate", gate()).set("wait_ms", gate_ms), false};
    return plain();
  }
  std::optional<Result<sql::Rows>> numbered() override { return std::exchange(numbered_, std::nullopt); }
  std::optional<sql::Rows> refusal_read() override { return std::exchange(refusal_read_, std::nullopt); }
  std::chrono::microseconds handshake() const override { return conn_ ? conn_->handshake() : std::chrono::microseconds(0); }
  // On MariaDB a first attempt's numbering goes behind a wait for its proof (lock.grant_wait,
  // within :poll_ms), so a run's lock statement and its numbering go out together, each on its
  // session, with no gate taken first: one round trip for both.
  bool chains_first() const override {
    return !grant_wait_.empty() && conn_ && conn_->mariadb() && row_lock_ && book_->connection().socket() >= 0;
  }
  // The waiter at the head of the key's queue (its bookkeeping session holds the queue name)
  // waits for the holder's wake name here, its lock statement behind the wait: the holder's end
  // gives the row lock back and then the name, and the lock statement runs at once, in the
  // wake's round trip (on MariaDB, which runs a block).
  bool waits_behind() const override { return conn_ && conn_->mariadb(); }
  void send_behind(const sql::Statement& ahead, const sql::Params& params) override {
    behind_.emplace(ahead, params);
    told_ = sql::AheadAnswer::untold;
  }
  sql::AheadAnswer told() const override { return told_; }
  // advisory's session is the bookkeeping one, opened without a holder's idle limit: a
  // contender of a start storm that never holds spares that round trip. Set once it holds,
  // once per session; failing, the take fails (core gives the lock back). MariaDB's numbered
  // take (its answer's four columns, lock_statements) sets it itself (:idle_s, bind). The row
  // lock's statements take the holder tag
  // and the key's wake name with it (its last column, 1 when taken): the session, now holding,
  // ends with its ROLLBACK.
  Result<void> holding(const std::string& key, const sql::Rows& answer) override {
    if (!conn_) return fail(ErrorKind::connection, "the lock session is closed");
    if (!row_lock_) {
      if (idle_for_ == conn_->session_id()) return {};
      if (!answer.empty() && answer[0].columns() == 4) {
        idle_for_ = conn_->session_id();
        return {};
      }
      if (auto ok = conn_->query(holder_idle_limits()); !ok) return ok;
      idle_for_ = conn_->session_id();
      return {};
    }
    ends_with_rollback_ = true;
    if (!answer.empty() && answer[0].opt_int64(answer[0].columns() - 1).value_or(0) == 1)
      book_->wake_held_by_holder(key);
    return {};
  }
  // The claims row must be there, committed, before anyone can lock it (without autocommit
  // here, its INSERT would stay this session's alone).
  Result<void> claim_made(bool made) override {
    if (!conn_) return fail(ErrorKind::connection, "the lock session is closed");
    if (made) return conn_->query("COMMIT");
    if (conn_->in_transaction()) (void)conn_->query("ROLLBACK");  // a busy take leaves none open
    return {};
  }
  // A holder's ROLLBACK ends its session too (ROLLBACK RELEASE): the server gives back the row
  // lock, then, as the session ends, the holder tag and the key's wake name, which lets the next
  // waiter in; one round trip for what took three (the ROLLBACK, the tag's RELEASE_LOCK here, the
  // wake name's on the bookkeeping session). Its answer still says the session held the lock to
  // the end; closed, the session needs no untag (core). A later take opens a new session (core
  // reopens a closed one).
  Result<void> exec(std::string_view sql) override {
    if (!conn_) return fail(ErrorKind::connection, "the lock session is closed");
    if (sql != "ROLLBACK" || !std::exchange(ends_with_rollback_, false)) return conn_->query(sql);
    auto r = conn_->query("ROLLBACK RELEASE");
    own_.reset();
    conn_ = nullptr;
    gate_held_ = false;  // with the session
    return r;
  }
  // MariaDB's row_release_ended (core's lock_statements) is a block that commits itself and then gives
  // the holder tag (:tag, this session's) and the key's wake name back: one round trip, and the
  // session, its transaction ended, needs no ROLLBACK RELEASE.
  Result<sql::Rows> run_and_commit(const sql::Statement& st, const sql::Params& p) override {
    if (!conn_) return fail(ErrorKind::connection, "the lock session is closed");
    sql::Params q = p;
    auto r = conn_->run(st, q.set("tag", tag_));
    if (r) ends_with_rollback_ = false;
    return r;
  }
  void close() override {
    if (conn_ && conn_ == shared_) conn_->close();
    behind_.reset();
    own_.reset();
    conn_ = nullptr;
    ends_with_rollback_ = false;
    gate_held_ = false;
    numbering_.reset();
  }

  // innodb_lock_wait_timeout is the session's, so it is set before the transaction, and only
  // when it changed: a waiter's attempts mostly ask the same. On MariaDB it goes ahead of the
  // lock statement, in its block and round trip (send). The session runs without autocommit
  // (open_holder_connection): the lock statement that follows opens the transaction itself, a
  // round trip fewer before the lock (and in a handoff); START TRANSACTION only where one is
  // still open, which it commits, as it always did.
  Result<void> begin(const sql::LockStatements& st, const sql::Params& p, Millis wait) override {
    if (wait != lock_wait_) {
      if (conn_->mariadb()) {
        ahead_ = st.lock_wait;
      } else if (auto r = conn_->run(st.lock_wait, p); !r) {
        return std::unexpected(r.error());
      }
      lock_wait_ = wait;
    }
    if (!conn_->in_transaction()) return {};
    return conn_->query(st.begin);
  }
  // The lock statement, with begin's lock wait ahead of it on MariaDB.
  Result<void> send(const sql::Statement& st, const sql::Params& p, Millis wait) override {
    if (conn_ && conn_->mariadb())
      if (const sql::Statement ahead = std::exchange(ahead_, {}); !ahead.empty()) conn_->put_ahead_of_next(ahead);
    return HolderSession::send(st, p, wait);
  }
  // On MariaDB txn-insert's INSERT goes ahead of the holder tag that the locker runs next
  // (Connection::put_ahead_of_next), one round trip for both, its error the tag's (an INSERT that found
  // the key held: busy), begin's lock wait ahead of both.
  Result<void> send_before_tag(const sql::Statement& st, const sql::Params& p, Millis wait) override {
    if (!conn_ || !conn_->mariadb()) return HolderSession::send(st, p, wait);
    const sql::Statement ahead = std::exchange(ahead_, {});
    conn_->put_ahead_of_next(ahead.empty() ? st : sql::Statement{st.id, ahead.text + "; " + st.text});
    inserted_ahead_ = true;
    return {};
  }
  Result<sql::Rows> answer() override {
    if (!std::exchange(inserted_ahead_, false)) return HolderSession::answer();
    sql::Rows inserted;
    inserted.affected = 1;
    return inserted;
  }
  // Withdrawn, what went ahead of it did not run: the lock wait is set again at the next begin.
  void withdraw(bool waits) override {
    inserted_ahead_ = false;
    behind_.reset();
    numbering_.reset();  // not sent yet: it goes with the lock statement's run
    if (conn_ && conn_->mariadb()) {
      conn_->put_ahead_of_next({});
      lock_wait_ = Millis(-1);
    }
    HolderSession::withdraw(waits);
  }

  // The first session may come opened already (open_holder's `opened`: the backend opened it
  // beside the bookkeeping session, so the run waits for one handshake, not two in a row).
  // advisory's is the bookkeeping session's connection, opened as a holder's
  // (make_session_locker in mysql_backend.cpp): made again only once it was lost or closed.
  Result<void> reopen() override {
    own_.reset();
    conn_ = nullptr;
    ends_with_rollback_ = false;
    lock_wait_ = Millis(0);
    ahead_ = {};
    behind_.reset();
    inserted_ahead_ = false;
    gate_held_ = false;
    numbering_.reset();
    if (!row_lock_) {
      shared_ = &book_->connection();
      if (!std::exchange(first_, false) || shared_->socket() < 0)
        if (auto ok = shared_->reconnect(); !ok) return ok;
      conn_ = shared_;
      return {};
    }
    auto c = opened_ ? Result<std::unique_ptr<Connection>>(std::move(opened_))
                     : open_holder_connection(strategy_, dsn_, options_);
    opened_.reset();
    if (!c) return std::unexpected(c.error());
    own_ = std::move(*c);
    conn_ = own_.get();
    std::random_device rd;  // the tag: 128 random bits as 32 hex digits, new with every session
    char tag[33];
    std::snprintf(tag, sizeof tag, "%08x%08x%08x%08x", rd(), rd(), rd(), rd());
    tag_ = tag;
    return {};
  }

  bool transaction_open() const override { return conn_ && conn_->in_transaction(); }

  // What status and `release --force` find the holder by (holder_lock in mysql_statements.cpp):
  // advisory's lock name holds the key, so the connection id goes with it; the row locks' go
  // with the holder tag.
  std::string session_id() const override {
    const std::string id = conn_ ? std::to_string(conn_->session_id()) : "0";
    return row_lock_ ? id + ":" + tag_ : id;
  }

  int socket() const override { return conn_ ? conn_->socket() : -1; }

  // A wait longer than the read timeout would look like a dead server (core calls again); a row
  // lock waits whole seconds, never longer than asked.
  Millis server_wait(Millis wait, bool row) const override {
    const Millis w = conn_ ? std::min(wait, Millis(conn_->max_block_ms())) : Millis(0);
    return row ? w - w % 1000 : w;
  }

  // A lock holder's idle limit in seconds (Connection::open's for ConnectionRole::lock_holder).
  std::int64_t holder_idle_s() const {
    constexpr std::int64_t year_s = 31536000;  // the longest wait_timeout MySQL accepts
    const Millis limit = options_.session_idle_limit;
    return limit.count() > 0 ? std::clamp<std::int64_t>((limit.count() + 999) / 1000, 1, year_s) : year_s;
  }
  std::string holder_idle_limits() const {
    const std::string n = std::to_string(holder_idle_s());
    return "SET SESSION wait_timeout = " + n + ", SESSION interactive_timeout = " + n;
  }

  // :tag, the lock session's; :seconds, the row locks' wait; :wait_ms, GET_LOCK's; :idle_s, the
  // holder's idle limit (MariaDB's numbered advisory take sets it).
  void bind(sql::Params& p, const std::string&, Millis wait) const override {
    p.set("tag", tag_).set("seconds", wait.count() / 1000).set("wait_ms", std::int64_t{wait.count()});
    if (!row_lock_) p.set("idle_s", holder_idle_s());
  }

  sql::Waiters& release_signal() override { return row_lock_ ? book_->release_signal() : no_signal_; }

 private:
  // The numbering gate (send_numbering; core's LockStatements::gate_*, over the named locks):
  // taken by the lock session, given back after its lock statement; waited for by the
  // bookkeeping session ahead of the numbering, and given back by it at once (it orders, it
  // guards nothing: the numbering proves the grant); let go and taken again once the
  // bookkeeping session has had it (settle_numbering).
  // The gate's name: the session's tag, which no other session has.
  std::string gate() const { return "dblock-gate:" + tag_; }
  // gate_take's: the gate, waited for at most 5 s (nobody else takes it; the bookkeeping
  // session's wait gives it back at once).
  sql::Params gate_params() const { return sql::Params().set("gate", gate()).set("wait_ms", std::int64_t{5000}); }

  // The numbering kept by send_numbering, sent now, as the lock statement goes: the gate's
  // give-back after the lock statement, the gate's wait ahead of the numbering. false: none.
  bool start_numbering() {
    auto n = std::exchange(numbering_, std::nullopt);
    if (!n) return false;
    first_numbering_ = n->first;
    if (n->first) {
      try {
        auto waited = std::make_shared<sql::Rows>();
        numbering_run_ = std::async(std::launch::async, [book = book_, wait = grant_wait_, n = std::move(*n), waited] {
          return book->connection().run_behind(wait, n.st, n.p, *waited);
        });
        waited_ = std::move(waited);
      } catch (const std::system_error&) {
        return false;
      }
      return true;
    }
    try {
      // The gate's wait ahead of the numbering, in its block and round trip (its answer apart).
      numbering_run_ = std::async(std::launch::async, [book = book_, wait = gate_wait_, n = std::move(*n)] {
        sql::Rows waited;
        return book->connection().run_behind(wait, n.st, n.p, waited);
      });
    } catch (const std::system_error&) {  // no thread to be had: numbered as before
      return false;
    }
    conn_->put_after_next(gate_give_);
    return true;
  }
  // After the lock statement `r` sent with a numbering (`behind`: behind a wait): the numbering's
  // answer read (numbered()), so that nothing of it is pending on the bookkeeping session. A
  // block that ran to its end gave the gate back, and a session gone took it with it. A lock
  // wait that ended with the slice (the wait it went behind reached its bound, or the row's
  // own wait ran out with none) keeps it: the numbering's wait ends with its own, at about the
  // same moment, and numbers nothing. Anything else that failed lets it go now and takes it
  // again, so the numbering runs at once (and finds no grant), not at the end of its wait.
  void settle_numbering(const Result<sql::Rows>& r, bool behind) {
    if (std::exchange(first_numbering_, false)) {
      // No gate: the numbering's wait ends with its proof, its bound, or the key shown busy.
    } else if (r || r.error().kind == ErrorKind::connection || !conn_ || conn_->socket() < 0) {
      gate_held_ = false;
    } else if (r.error().kind != ErrorKind::wait_ended || (behind && told_ != sql::AheadAnswer::bound_reached)) {
      // Given back and taken again in one round trip (the give-back's answer apart).
      sql::Rows given;
      auto again = conn_->run_behind(gate_give_, gate_take_, gate_params(), given);
      gate_held_ = again && !again->empty() && (*again)[0].opt_int64(0).value_or(0) == 1;
    }
    numbered_ = numbering_run_.get();
    // The wait's answer is there once the numbering answered (the thread wrote it first).
    if (auto w = std::exchange(waited_, nullptr); w && !w->empty()) refusal_read_ = std::move(*w);
  }

  Strategy strategy_;
  bool row_lock_;
  Dsn dsn_;
  BackendOptions options_;
  std::shared_ptr<Session> book_;     // its waiters' queue is the row-lock strategies'
  std::unique_ptr<Connection> own_;   // the lock session, a row lock's
  Connection* conn_ = nullptr;        // the lock session: own_, or advisory's shared_
  Connection* shared_ = nullptr;      // advisory's: the bookkeeping session's connection
  bool first_ = true;                 // advisory: its connection is still the one opened for it
  std::uint64_t idle_for_ = 0;        // advisory: the session whose idle limit is the holder's (holding)
  std::unique_ptr<Connection> opened_;  // its first, opened beside the bookkeeping session (reopen)
  std::string tag_;                   // the lock session's
  Millis lock_wait_{0};               // its innodb_lock_wait_timeout, as set with it (reopen)
  sql::Statement ahead_;              // MariaDB: begin's lock wait, for the lock statement (send)
  bool inserted_ahead_ = false;       // txn-insert's INSERT goes ahead of the tag (send_before_tag)
  std::optional<std::pair<sql::Statement, sql::Params>> behind_;  // the wait the next run goes behind
  sql::AheadAnswer told_ = sql::AheadAnswer::untold;              // what that wait told (told)
  bool ends_with_rollback_ = false;   // it holds a row lock, tagged: its ROLLBACK ends it (exec)
  sql::Waiters no_signal_;
  struct Numbering {
    sql::Statement st;
    sql::Params p;
    bool first;  // a first attempt's: no gate (chains_first)
  };
  std::optional<Numbering> numbering_;               // send_numbering's, until the lock statement runs
  std::future<Result<sql::Rows>> numbering_run_;     // its run on the bookkeeping session
  std::optional<Result<sql::Rows>> numbered_;        // numbered()
  std::shared_ptr<sql::Rows> waited_;                // a first attempt's grant_wait answer, as it runs
  std::optional<sql::Rows> refusal_read_;            // refusal_read()
  bool gate_held_ = false;                           // the session holds the numbering gate
  bool first_numbering_ = false;                     // the numbering running is a first attempt's
  sql::Statement gate_take_, gate_wait_, gate_give_;  // the gate's (LockStatements::gate_*)
  sql::Statement grant_wait_;                         // a first attempt's (LockStatements::grant_wait)
};

}  // namespace

Result<std::unique_ptr<Connection>> open_holder_connection(Strategy s, const Dsn& dsn, const BackendOptions& options) {
  // The row-lock strategies start with no lock wait (core's slices are under a second), set
  // with the connection rather than by a SET before the first attempt. And no gap locks: under
  // REPEATABLE READ a for-update take of a key whose claims row is not there yet locks the gap
  // around it, and the INSERT of a neighbouring key (txn-insert's lock, for-update's claims
  // row) reads busy meanwhile. A second inserter of the same key waits on the first one's row.
  // The isolation level's variable is tx_isolation on MariaDB (transaction_isolation only from
  // 11.1), transaction_isolation on MySQL (tx_isolation is gone in 8.0): each server runs the
  // one comment meant for it (MariaDB /*M! */, which MySQL skips; MySQL /*!50720 */, a MySQL
  // version MariaDB skips), so the setting needs no server known first and the session can be
  // opened beside the bookkeeping one, before either handshake has said which server it is.
  // No autocommit: the lock statement opens its transaction (MysqlHolder::begin).
  const bool row_lock = s != Strategy::advisory;
  return Connection::open(dsn, options, ConnectionRole::lock_holder,
                          row_lock ? ", SESSION innodb_lock_wait_timeout = 0, SESSION /*M!100000 tx_isolation*/"
                                     "/*!50720 transaction_isolation*/ = 'READ-COMMITTED', SESSION autocommit = 0"
                                   : "");
}

Result<std::unique_ptr<sql::HolderSession>> open_holder(Strategy s, const Dsn& dsn, const BackendOptions& options,
                                                        std::shared_ptr<Session> book, const sql::LockStatements& st,
                                                        std::unique_ptr<Connection> opened) {
  auto holder = std::make_unique<MysqlHolder>(s, dsn, options, std::move(book), std::move(opened), st);
  if (auto r = holder->reopen(); !r) return std::unexpected(r.error());
  return std::unique_ptr<sql::HolderSession>(std::move(holder));
}

}  // namespace dblock::mysql

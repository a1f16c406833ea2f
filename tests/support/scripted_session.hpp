#pragma once
// An sql::Session without a database, for the tests of core/sql: each statement is answered
// from `in_turn`, then `answers`, by its id (no rows when it has none) and counted; the first
// run of an id in `lose_first_reply` runs but loses its connection before the reply (a read
// timeout on a loaded server); reconnects are counted; a wait for a release can be made to lose
// its connection (MySQL's wake queue, PostgreSQL's LISTEN). And a lock request to make of it.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/lock_types.hpp"
#include "core/sql/failover.hpp"
#include "core/sql/sql_session.hpp"

namespace dblock::testing {

class ScriptedSession final : public sql::Session {
 public:
  Result<sql::Rows> run(const sql::Statement& st, const sql::Params& params) override {
    sent.push_back(st.id);
    last_params[st.id] = params;
    if (auto it = takes.find(st.id); it != takes.end()) std::this_thread::sleep_for(it->second);
    if (++runs[st.id] == 1 && lose_first_reply.count(st.id)) return fail(ErrorKind::connection, "the reply was lost");
    if (auto turn = in_turn.find(st.id); turn != in_turn.end() && !turn->second.empty()) {
      sql::Rows next = std::move(turn->second.front());
      turn->second.pop_front();
      return next;
    }
    auto it = answers.find(st.id);
    return it == answers.end() ? sql::Rows{} : it->second;
  }
  /// One round trip: "<ahead's id> ahead" then the statement's id, as run() notes it.
  Result<sql::Rows> run_behind(const sql::Statement& ahead, const sql::Params& ahead_params, const sql::Statement& st,
                               const sql::Params& params, Millis, sql::AheadAnswer& answer) override {
    sent.push_back(ahead.id + " ahead");
    last_params[ahead.id] = ahead_params;
    answer = ahead_answers;
    return run(st, params);
  }
  Result<void> exec(std::string_view sql) override {
    sent.emplace_back(sql);
    return {};
  }
  void prepare(const sql::Statement& st) override {
    prepared.push_back(st.id + (runs.count(st.id) && runs.at(st.id) ? " (after a run)" : ""));
  }
  Result<void> reconnect(const Error&) override {
    ++reconnects;
    return {};
  }
  std::string where() const override { return "scripted"; }
  sql::Waiters& release_signal() override { return drop_waits ? dropping_ : signal_; }
  std::int64_t started_id() const override { return started; }
  void served_directly_seen() override { ++seen_direct; }

  std::map<std::string, sql::Rows> answers;  // by statement id
  std::map<std::string, std::deque<sql::Rows>> in_turn;  // by statement id: one a run, before `answers`
  std::int64_t started = 0;                  // started_id
  std::set<std::string> lose_first_reply;    // statement ids
  std::map<std::string, int> runs;           // by statement id
  std::map<std::string, Millis> takes;       // by statement id: how long its answer takes (a distance)
  std::map<std::string, sql::Params> last_params;  // by statement id: its last run's
  std::vector<std::string> prepared;         // statement ids, in order of prepare()
  std::vector<std::string> sent;             // statement ids run and SQL text exec'd, in order
  int reconnects = 0;
  int seen_direct = 0;  // served_directly_seen() calls
  bool drop_waits = false;  // a wait for a release loses the connection
  sql::AheadAnswer ahead_answers = sql::AheadAnswer::let_in;  // what every wait run_behind sends ahead tells
  /// The session's waiters' queue over `wake` (the dialect's wake primitive).
  void wake_with(std::unique_ptr<sql::Wake> wake) { signal_ = sql::Waiters(std::move(wake)); }

 private:
  class DroppingWake final : public sql::Wake {
   public:
    Result<bool> join(const std::string&, Millis) override { return fail(ErrorKind::connection, "gone"); }
  };
  sql::Waiters signal_;
  sql::Waiters dropping_{std::make_unique<DroppingWake>()};
};

/// One row of `cells`, with `affected` rows changed.
inline sql::Rows row_of(std::vector<sql::Rows::Cell> cells, std::int64_t affected = 0) {
  sql::Rows rows;
  rows.add(std::move(cells));
  rows.affected = affected;
  return rows;
}

/// A request for key "k" by owner "me" on host "h", pid 1, with `ttl`.
// The failover record's statements, each answered by its id (its text says nothing).
inline sql::FailoverStatements failover_statements() {
  sql::FailoverStatements st;
  st.read = {"failover.read", "read"};
  st.create = {"failover.create", "create"};
  st.max_token = {"failover.max_token", "max"};
  st.move = {"failover.move", "move"};
  st.raise_ttl = {"failover.raise_ttl", "raise"};
  return st;
}

inline LockRequest lock_request(Millis ttl) {
  LockRequest req;
  req.key = "k";
  req.owner = "me";
  req.host = "h";
  req.pid = 1;
  req.ttl = ttl;
  return req;
}

}  // namespace dblock::testing

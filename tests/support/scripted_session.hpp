#pragma once
// An sql::Session without a database, for the tests of core/sql: each statement is answered
// by `answer` (no rows by default; an error for a statement that failed) and counted by its id; reconnects are counted; a wait for
// a release can be made to lose its connection (MySQL's wake queue, PostgreSQL's LISTEN).
// And a lock request to make of it.

#include <functional>
#include <map>
#include <string>

#include "core/lock_types.hpp"
#include "core/sql/sql_session.hpp"

namespace dblock::testing {

class ScriptedSession final : public sql::Session {
 public:
  Result<sql::Rows> run(const sql::Statement& st, const sql::Params&) override {
    ++runs[st.id];
    return answer ? answer(st) : Result<sql::Rows>(sql::Rows{});
  }
  Result<void> exec(std::string_view) override { return {}; }
  Result<void> reconnect(const Error&) override {
    ++reconnects;
    return {};
  }
  bool schema_missing(const Error&) const override { return false; }
  std::string where() const override { return "scripted"; }
  sql::ReleaseSignal& release_signal() override { return drop_waits ? dropping_ : signal_; }

  std::function<Result<sql::Rows>(const sql::Statement&)> answer;
  std::map<std::string, int> runs;  // by statement id
  int reconnects = 0;
  bool drop_waits = false;  // a wait for a release loses the connection

 private:
  class DroppingSignal final : public sql::ReleaseSignal {
   public:
    Result<bool> busy(const std::string&, Millis) override { return fail(ErrorKind::connection, "gone"); }
  };
  sql::ReleaseSignal signal_;
  DroppingSignal dropping_;
};

/// A request for key "k" by owner "me" on host "h", pid 1, with `ttl`.
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

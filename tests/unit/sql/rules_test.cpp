// The rules core spells once for every dialect (core/sql/rules.hpp), rendered through a
// dialect's expressions: here a made-up dialect whose every expression is marked.
#include <doctest/doctest.h>

#include "core/sql/lock_rows.hpp"
#include "core/sql/rules.hpp"
#include "core/sql/sql_session.hpp"

using namespace dblock;

namespace {

const sql::Dialect marked{
    .now = "NOW",
    .time_of_ms = [](std::string_view ms) { return "TIME(" + std::string(ms) + ")"; },
    .started_ms_ago = [](std::string_view row,
                         std::string_view now) { return "AGO(" + std::string(row) + ", " + std::string(now) + ")"; },
    .lease_live = [](std::string_view row, std::string_view) { return "LIVE(" + std::string(row) + ")"; },
    .begin = "BEGIN",
    .begin_unsynced = "BEGIN UNSYNCED",
    .utc_now = "UTC",
    .epoch_ms = [](std::string_view t) { return "MS(" + std::string(t) + ")"; },
    .plus_ms = [](std::string_view t, std::string_view ms) { return "PLUS(" + std::string(t) + ", " + std::string(ms) + ")"; },
    .json_texts = [](std::string_view param) { return "JSON(" + std::string(param) + ")"; },
    .returning = [](std::string_view columns) { return " RETURNING " + std::string(columns); },
    .upsert = &sql::on_conflict_upsert,
    .session_holds = [](std::string_view row, const Tables& t) { return "HOLDS(" + std::string(row) + ", " + t.prefix + ")"; },
    .ended_session = [](std::string_view rows, const Tables&) { return "SELECT ENDED FROM " + std::string(rows); },
    .own_lease = {},
    .take = [](const sql::Take& k) {
      std::string columns;
      for (const auto& c : k.returning) columns += (columns.empty() ? "" : ", ") + c;
      return "TAKE(" + k.fence + ") " + sql::on_conflict_upsert(k.upsert(k.fence)) + " RETURNING " + columns;
    },
    .release_returns = "TELL(name)",
    .incarnation = "INC",
    .session_id = "SESSION",
    .serving = [](const Tables& t) { return "SERVED(" + t.prefix + ")"; },
};

}  // namespace

TEST_CASE("--min-interval's due check: none asked, never started, or started at least that long ago") {
  CHECK(sql::due_sql(marked, "l.", "AT") ==
        "(:min_interval_ms <= 0 OR l.last_started_at IS NULL OR AGO(l., AT) >= :min_interval_ms)");
  // Read only with --min-interval (lock_steps.cpp, refused()); NULL for a row never started.
  CHECK(sql::due_in_ms_sql(marked, "") == ":min_interval_ms - AGO(, NOW)");
}

TEST_CASE("the history statements: one each, in the dialect's time and integer expressions") {
  const sql::HistoryStatements h = sql::history_statements(marked, "R");
  CHECK(h.add.id == "history.add");
  CHECK(h.add.text ==
        "INSERT INTO R (name, token, owner, host, pid, strategy, started_at, finished_at, outcome, exit_code) VALUES"
        " (:name, :token, :owner, :host, :pid, :strategy, TIME(:started_ms), NOW, :outcome,"
        " :exit_code)");
  CHECK(h.oldest.text == "SELECT token FROM R WHERE name = :name ORDER BY id LIMIT 1");
  CHECK(h.trim.text == "DELETE FROM R WHERE name = :name AND id <= (SELECT id FROM (SELECT id FROM R WHERE name ="
                       " :name ORDER BY id DESC LIMIT 1 OFFSET :keep) AS cutoff)");
}

TEST_CASE("fencing tokens: the one given, else one above the row's last and the failover fence") {
  CHECK(sql::first_token_sql(true, "F") == "COALESCE(:token, F + 1)");
  CHECK(sql::next_token_sql("l.", true, "F") == "COALESCE(:token, GREATEST(l.token, F) + 1)");
  // No fence (SQLite; ShedLock's numbering) and no token given (a semaphore's header).
  CHECK(sql::first_token_sql(false, "") == "1");
  CHECK(sql::next_token_sql("", false, "") == "token + 1");
  CHECK(sql::next_token_sql("", false, "F") == "GREATEST(token, F) + 1");
}

TEST_CASE("a semaphore's header: its slot count, or no slot held on a recount; any other row when nobody holds it") {
  CHECK(sql::header_free_sql(marked, "l.", "L") ==
        "CASE WHEN l.strategy = 'semaphore' THEN l.slots = :slots OR (:recount = 1 AND NOT EXISTS (SELECT"
        " 1 FROM (SELECT 1 FROM L s WHERE s.name > :first AND s.name < :past AND s.released_at IS NULL AND (s.strategy"
        " IS NULL OR s.strategy <> 'lease' OR LIVE(s.)) LIMIT 1) AS held)) ELSE l.acquired_at IS NULL OR (NOT LIVE(l.) AND"
        " (l.released_at IS NOT NULL OR l.strategy = 'lease')) END");
}

TEST_CASE("the failover gate: the record names this server, no lock-delay in force, the TTL covered") {
  CHECK(sql::failover_delayed_sql(marked, "r.") == "LIVE(r.)");
  CHECK(sql::failover_covers_sql("r.") == "r.pid >= :ttl_ms");
  CHECK(sql::failover_open_sql(marked, "", "here") == "(here AND NOT LIVE() AND pid >= :ttl_ms)");
}

namespace {

sql::Dialect marked_dialect_copy() { return marked; }

// The marked dialect without RETURNING, with a lease of its own clock (OwnLease).
sql::Dialect without_returning_with_own_lease() {
  sql::Dialect d = marked;
  d.returning = [](std::string_view) { return std::string(); };
  d.own_lease.live = [](std::string_view row) { return "OWN(" + std::string(row) + ")"; };
  d.own_lease.start = [](std::string_view token, std::string_view ms) {
    return sql::Assignments{{"own_token", std::string(token)}, {"own_until", "CLOCK + " + std::string(ms)}};
  };
  d.own_lease.renew = [](std::string_view ms) { return sql::Assignments{{"own_until", "CLOCK + " + std::string(ms)}}; };
  d.own_lease.end = [](std::string_view hold) { return sql::Assignments{{"own_until", "END(" + std::string(hold) + ")"}}; };
  return d;
}

}  // namespace

TEST_CASE("ShedLock's statements: one builder, ShedLock's time, the dialect's upsert and RETURNING") {
  const Tables t("p_", '"');
  const sql::ShedlockStatements s = sql::shedlock_statements(marked, t, "\"shed\"");
  CHECK(s.begin == "BEGIN");
  CHECK(s.take.text ==
        "INSERT INTO \"shed\" AS s (name, lock_until, locked_at, locked_by) VALUES (:key, PLUS(UTC, :ttl_ms), UTC,"
        " :owner) ON CONFLICT (name) DO UPDATE SET locked_at = EXCLUDED.locked_at, locked_by = EXCLUDED.locked_by,"
        " lock_until = EXCLUDED.lock_until WHERE s.lock_until <= UTC RETURNING MS(lock_until)");
  CHECK(s.number.text.find("token = l.token + 1") != std::string::npos);
  CHECK(s.number.text.ends_with(" RETURNING token, MS(acquired_at)"));
  // With RETURNING, `number` answers itself; no lease of its own, nothing to extend beside ShedLock's.
  CHECK(s.numbered.empty());
  CHECK(s.extend_own.empty());
  CHECK(s.extend.text == "UPDATE \"shed\" SET lock_until = PLUS(UTC, :ttl_ms) WHERE name = :key AND locked_by ="
                         " :owner AND lock_until > UTC AND EXISTS (SELECT 1 FROM \"p_locks\" WHERE name = :key AND"
                         " token = :token)");
  CHECK(s.released.text == "UPDATE \"p_locks\" SET released_at = NOW WHERE name = :key AND owner = :owner AND"
                           " released_at IS NULL AND strategy = 'shedlock'");
}

TEST_CASE("ShedLock's statements: a read where the upsert returns nothing, the dialect's own lease kept beside") {
  const sql::Dialect d = without_returning_with_own_lease();
  const sql::ShedlockStatements s = sql::shedlock_statements(d, Tables("p_", '"'), "\"shed\"");
  CHECK(s.take.text.find("RETURNING") == std::string::npos);
  // The own lease decides before ShedLock's wall clock: live, nobody takes it; released and over, anyone may.
  CHECK(s.take.text.ends_with("WHERE (s.lock_until <= UTC AND NOT EXISTS (SELECT 1 FROM \"p_locks\" l WHERE l.name ="
                              " s.name AND l.owner = s.locked_by AND l.strategy = 'shedlock' AND l.released_at IS NULL"
                              " AND OWN(l.) = 1) OR EXISTS (SELECT 1 FROM \"p_locks\" l WHERE l.name = s.name AND"
                              " l.owner = s.locked_by AND l.strategy = 'shedlock' AND l.released_at IS NOT NULL AND"
                              " OWN(l.) = 0))"));
  CHECK(s.number.text.find("own_token, own_until) VALUES (") != std::string::npos);
  CHECK(s.number.text.find("own_token = l.token + 1, own_until = CLOCK + :ttl_ms WHERE") != std::string::npos);
  CHECK(s.numbered.text.starts_with("SELECT token, MS(acquired_at) FROM \"p_locks\" WHERE name = :key AND owner = :owner"));
  CHECK(s.extend_own.text == "UPDATE \"p_locks\" SET renewed_at = NOW, own_until = CLOCK + :ttl_ms WHERE name ="
                             " :key AND owner = :owner AND token = :token AND released_at IS NULL AND OWN() IS NOT"
                             " NULL");
  CHECK(s.finish.text.find(", own_until = END(:min_hold_ms) WHERE") != std::string::npos);
  CHECK(s.released.text.find("SET released_at = NOW, own_until = END() WHERE") != std::string::npos);
}

TEST_CASE("inspection's statements: status with live and the server's verdict, renew of the named holder") {
  const sql::tables::SchemaDialect sd{.quote = '"'};
  BackendOptions options;
  options.table_prefix = "p_";
  const sql::InspectStatements s = sql::inspect_statements(marked, sd, options);
  CHECK(s.status_keys.text.starts_with("SELECT name, owner, host, pid, token, strategy, MS(acquired_at)"));
  CHECK(s.status_keys.text.ends_with(", MS(NOW), CASE WHEN LIVE(l.) THEN 1 ELSE 0 END, HOLDS(l., p_) FROM \"p_locks\" l"
                                     " WHERE l.name IN JSON(:keys) ORDER BY l.name"));
  CHECK(s.history_of.text.ends_with(" FROM \"p_runs\" h WHERE name = :name ORDER BY id DESC LIMIT :limit"));
  CHECK(s.slot_count.text == "SELECT slots FROM \"p_locks\" WHERE name = :key AND strategy = 'semaphore'");
  CHECK(s.renew_named.text ==
        "UPDATE \"p_locks\" SET renewed_at = NOW, expires_at = PLUS(NOW, :ttl_ms) WHERE name = :key AND"
        " released_at IS NULL AND (owner = :owner OR :owner IS NULL) AND (:token IS NULL OR token ="
        " :token) AND strategy = 'lease' RETURNING MS(expires_at)");
  CHECK(s.renewed.empty());
  CHECK(s.renew_own.empty());
  // Without RETURNING the renewal is read back; ShedLock's holder with a lease of the dialect's own renews that too.
  const sql::Dialect d = without_returning_with_own_lease();
  CHECK(sql::inspect_statements(d, sd, options).renewed.text ==
        "SELECT MS(expires_at) FROM \"p_locks\" WHERE name = :key AND released_at IS NULL AND (owner = :owner OR"
        " :owner IS NULL) AND (:token IS NULL OR token = :token)");
  options.shedlock = true;
  options.shedlock_table = "shed";
  const sql::InspectStatements shed = sql::inspect_statements(d, sd, options);
  CHECK(shed.status_all.text.ends_with(" FROM \"shed\" s LEFT JOIN \"p_locks\" l ON l.name = s.name ORDER BY s.name"));
  CHECK(shed.renewed.text == "SELECT MS(lock_until) FROM \"shed\" WHERE name = :key");
  CHECK(shed.renew_own.text.starts_with("UPDATE \"p_locks\" SET renewed_at = NOW, own_until = CLOCK + :ttl_ms WHERE"));
}

TEST_CASE("the holder a renew or release from another process names: owner, token, or both") {
  CHECK(sql::named_holder_sql("l.") ==
        "(l.owner = :owner OR :owner IS NULL) AND (:token IS NULL OR l.token = :token)");
}

TEST_CASE("release of another process's holder: the named holder's row, or with --force whoever holds it") {
  const Tables t("p_", '"');
  const std::string rows_marked =
      "l.name = :key AND (:force = 1 AND (l.released_at IS NULL OR LIVE(l.)) OR l.released_at IS NULL AND"
      " (l.owner = :owner OR :owner IS NULL) AND (:token IS NULL OR l.token = :token))";
  const sql::ReleaseStatements s = sql::release_statements(marked, t);
  // --force also ends a --min-hold still running (LIVE on a released row), at now truncated to the millisecond.
  // The rows released answered in the same statement, each holder's session judged once.
  CHECK(s.release.text == "WITH released AS (UPDATE \"p_locks\" AS l SET released_at = NOW, expires_at = CASE WHEN"
                          " LIVE(l.) THEN TIME(MS(NOW)) ELSE l.expires_at END WHERE " + rows_marked +
                          " RETURNING l.*) SELECT ENDED FROM released l");
  CHECK(s.holder.empty());
  // Without RETURNING the holder is read first; without sessions nothing is answered; a lease of
  // the dialect's own ends with the row's.
  const sql::Dialect d = without_returning_with_own_lease();
  const sql::ReleaseStatements read_first = sql::release_statements(d, t);
  CHECK(read_first.holder.text == "SELECT ENDED FROM \"p_locks\" l WHERE " + rows_marked);
  CHECK(read_first.release.text.ends_with(" ELSE l.expires_at END, own_until = END() WHERE " + rows_marked));
  sql::Dialect no_sessions = marked_dialect_copy();
  no_sessions.ended_session = [](std::string_view, const Tables&) { return std::string(); };
  CHECK(sql::release_statements(no_sessions, t).release.text.ends_with(rows_marked));
}

TEST_CASE("the lease's statements: one builder, the dialect's take, the failover fence where it has one") {
  const Tables t("p_", '"');
  const sql::LeaseStatements s = sql::lease_statements(marked, t);
  CHECK(s.begin == "BEGIN");
  // The take: its tokens above the bound fence, free when the lease is over, no other
  // strategy's holder in the way and --min-interval past.
  CHECK(s.take.text.starts_with("TAKE(:fence) INSERT INTO \"p_locks\" AS l (name, owner, host, pid, token,"
                                " strategy, session_id, acquired_at, renewed_at, expires_at, released_at,"
                                " last_started_at) VALUES (:key, :owner, :host, :pid, COALESCE(:token,"
                                " :fence + 1), 'lease', NULL, NOW, NOW, PLUS(NOW, :ttl_ms), NULL, NOW)"));
  CHECK(s.take.text.find("token = COALESCE(:token, GREATEST(l.token, :fence) + 1)") != std::string::npos);
  CHECK(s.take.text.ends_with(" WHERE NOT LIVE(l.) AND (COALESCE(l.strategy, 'lease') = 'lease' OR l.released_at IS"
                              " NOT NULL OR l.acquired_at IS NULL) AND " +
                              sql::due_sql(marked, "l.", "NOW") + " RETURNING token, MS(acquired_at), MS(expires_at)"));
  CHECK(s.taken.empty());  // the take returns its row
  // The status columns a refused take reads (its holder, its state, when it may start), NULL
  // for the last run's and the renewal's.
  CHECK(s.refusal.text == "SELECT name, owner, host, pid, token, strategy, MS(acquired_at), NULL, MS(expires_at),"
                          " MS(released_at), MS(last_started_at), NULL, NULL, MS(NOW), CASE WHEN LIVE() THEN 1 ELSE 0"
                          " END, " + sql::due_in_ms_sql(marked, "") + " FROM \"p_locks\" WHERE name = :key");
  CHECK(s.refusal.text.find("SELECT " + rows::refusal_select_list(marked.epoch_ms, "NOW") + ", ") == 0);
  // Renewed, it says whether the failover record names another incarnation.
  CHECK(s.renew.text == "UPDATE \"p_locks\" SET renewed_at = NOW, expires_at = PLUS(NOW, :ttl_ms) WHERE name ="
                        " :key AND owner = :owner AND token = :token AND released_at IS NULL RETURNING (SELECT"
                        " count(*) FROM \"p_locks\" WHERE name = :record AND owner <> INC)");
  // Released: now, truncated to the millisecond, or the end of its --min-hold when later.
  CHECK(s.release.text ==
        "UPDATE \"p_locks\" SET released_at = NOW, expires_at = CASE WHEN :min_hold_ms > 0 AND"
        " PLUS(acquired_at, :min_hold_ms) > TIME(MS(NOW)) THEN PLUS(acquired_at, :min_hold_ms) ELSE"
        " TIME(MS(NOW)) END, last_finished_at = CASE WHEN :finished = 1 THEN NOW ELSE last_finished_at END,"
        " last_exit_code = CASE WHEN :finished = 1 THEN :exit_code ELSE last_exit_code END WHERE name ="
        " :key AND owner = :owner AND token = :token AND released_at IS NULL RETURNING TELL(name)");
  CHECK(s.header_take.text.find("WHERE " + sql::header_free_sql(marked, "l.", t.locks) + " RETURNING token") !=
        std::string::npos);
  CHECK(s.history.add.text == sql::history_statements(marked, t.runs).add.text);

  // No incarnation (SQLite): no fence, nothing said of a failover record; without RETURNING
  // the taken row is read back; a lease of the dialect's own starts, renews and ends with it.
  sql::Dialect d = without_returning_with_own_lease();
  d.take = [](const sql::Take& k) { return sql::on_conflict_upsert(k.upsert(k.fence)); };
  d.release_returns.clear();
  d.incarnation.clear();
  const sql::LeaseStatements own = sql::lease_statements(d, t);
  CHECK(own.failover.empty());
  CHECK(own.failover.create.empty());
  CHECK(own.renew.text.find(":record") == std::string::npos);
  CHECK(own.take.text.find("COALESCE(:token, 1), 'lease'") != std::string::npos);
  CHECK(own.take.text.find("own_token = COALESCE(:token, l.token + 1), own_until = CLOCK + :ttl_ms WHERE") !=
        std::string::npos);
  CHECK(own.taken.text == "SELECT token, MS(acquired_at), MS(expires_at) FROM \"p_locks\" WHERE name = :key AND"
                          " owner = :owner AND name = (SELECT name FROM \"p_locks\" WHERE name = :key)");
  CHECK(own.renew.text.ends_with("own_until = CLOCK + :ttl_ms WHERE name = :key AND owner = :owner AND token ="
                                 " :token AND released_at IS NULL"));
  CHECK(own.release.text.ends_with(", own_until = END(:min_hold_ms) WHERE name = :key AND owner = :owner AND"
                                   " token = :token AND released_at IS NULL"));
}

TEST_CASE("the failover statements: written once, the dialect giving its incarnation and serving columns") {
  const Tables t("p_", '"');
  const sql::FailoverStatements f = sql::lease_statements(marked, t).failover;
  CHECK(f.read.text == "SELECT r.owner, c.incarnation_now, r.host, r.token, MS(r.expires_at), MS(NOW), r.pid,"
                       " CASE WHEN r.owner = c.incarnation_now THEN 1 ELSE 0 END, CASE WHEN LIVE(r.) THEN 1 ELSE 0 END,"
                       " CASE WHEN r.pid >= :ttl_ms THEN 1 ELSE 0 END, SESSION, SERVED(p_) FROM (SELECT INC AS"
                       " incarnation_now) c LEFT JOIN \"p_locks\" r ON r.name = :record");
  CHECK(f.create.text == "INSERT INTO \"p_locks\" (name, owner, host, pid, token, strategy, acquired_at) VALUES"
                         " (:record, INC, NULL, :ttl_ms, 0, 'failover', NOW) ON CONFLICT (name) DO NOTHING");
  CHECK(f.max_token.text == "SELECT max(token) FROM \"p_locks\" WHERE name <> :record");
  CHECK(f.move.text == "UPDATE \"p_locks\" SET host = owner, owner = INC, token = :fence, acquired_at = NOW,"
                       " expires_at = PLUS(NOW, pid) WHERE name = :record AND owner <> INC");
  CHECK(f.raise_ttl.text == "UPDATE \"p_locks\" SET pid = :ttl_ms WHERE name = :record AND pid < :ttl_ms");
}

TEST_CASE("the session strategies' numbering: whoever of this strategy the row names, at the time the lock was granted") {
  const sql::Upsert u = sql::session_upsert(marked, Tables("p_", '"'), "F", "AT", "EXCLUDED.acquired_at");
  CHECK(sql::on_conflict_upsert(u, " FROM k WHERE k.got") ==
        "INSERT INTO \"p_locks\" AS l (name, owner, host, pid, token, strategy, session_id, acquired_at, renewed_at,"
        " expires_at, released_at, last_started_at) SELECT :key, :owner, :host, :pid, COALESCE(:token, F +"
        " 1), :strategy, :session_id, AT, AT, NULL, NULL, AT FROM k WHERE k.got ON CONFLICT (name) DO UPDATE SET"
        " owner = EXCLUDED.owner, host = EXCLUDED.host, pid = EXCLUDED.pid, strategy = EXCLUDED.strategy,"
        " session_id = EXCLUDED.session_id, acquired_at = EXCLUDED.acquired_at, released_at = NULL, token ="
        " COALESCE(:token, GREATEST(l.token, F) + 1), renewed_at = EXCLUDED.renewed_at, expires_at = NULL,"
        " last_started_at = EXCLUDED.last_started_at WHERE (l.strategy IS NULL OR l.strategy <> 'semaphore') AND"
        " (COALESCE(l.strategy, :strategy) = :strategy OR l.released_at IS NOT NULL OR l.acquired_at IS NULL OR (l.strategy = 'lease'"
        " AND l.expires_at <= EXCLUDED.acquired_at)) AND (l.expires_at IS NULL OR l.expires_at <="
        " EXCLUDED.acquired_at) AND " + sql::due_sql(marked, "l.", "EXCLUDED.acquired_at"));
}

TEST_CASE("every take writes each holder's column of the table description, and the request binds each") {
  const Tables t("p_", '"');
  const sql::LeaseStatements lease = sql::lease_statements(marked, t);
  const std::string session = sql::on_conflict_upsert(sql::session_upsert(marked, t, "F", "AT", "EXCLUDED.acquired_at"));
  const std::string shedlock = sql::shedlock_statements(marked, t, "\"shed\"").number.text;
  LockRequest req;
  req.owner = "o";
  req.host = "h";
  req.pid = 7;
  sql::Params p{{"key", std::string("k")}};
  rows::bind_holder(p, req);
  int holders = 0;
  for (const sql::tables::Column& c : sql::tables::locks_columns) {
    if (!c.holder) continue;
    ++holders;
    const std::string name(c.name), kept = name + " = EXCLUDED." + name;
    CAPTURE(name);
    for (const std::string& text : {lease.take.text, lease.header_take.text, session, shedlock}) {
      CHECK(text.find(", " + name + ",") != std::string::npos);  // among the inserted columns
      CHECK(text.find(":" + name) != std::string::npos);          // from its parameter
      CHECK(text.find(kept) != std::string::npos);                // and on the existing row
    }
    CHECK(p.find(name) != nullptr);
  }
  CHECK(holders >= 3);  // owner, host, pid and any added since
  CHECK(*p.find("pid") == sql::Value(std::int64_t{7}));
}

TEST_CASE("a dialect that leaves a member unset gets core's form of it") {
  // Only what every dialect spells its own way; the rest is core's (rules.hpp, Dialect).
  const sql::Dialect plain{
      .now = "NOW",
      .time_of_ms = [](std::string_view ms) { return "TIME(" + std::string(ms) + ")"; },
      .started_ms_ago = [](std::string_view row, std::string_view) { return "AGO(" + std::string(row) + ")"; },
      .lease_live = [](std::string_view row, std::string_view) { return "LIVE(" + std::string(row) + ")"; },
      .epoch_ms = [](std::string_view t) { return "MS(" + std::string(t) + ")"; },
      .plus_ms = [](std::string_view t, std::string_view ms) { return "PLUS(" + std::string(t) + ", " + std::string(ms) + ")"; },
      .json_texts = [](std::string_view param) { return "JSON(" + std::string(param) + ")"; },
  };
  const Tables t("p_", '"');
  const sql::Dialect standard{};
  CHECK(standard.json_texts(":keys") == "(SELECT k FROM JSON_TABLE(:keys, '$[*]' COLUMNS(k VARCHAR(255) PATH '$')) AS j)");
  CHECK(plain.begin == "START TRANSACTION");
  CHECK(plain.utc_now == "NOW");
  CHECK(plain.returning("x") == " RETURNING x");
  CHECK(plain.session_holds("l.", t) == "0");
  CHECK(plain.ended_session("l", t).empty());

  const sql::LeaseStatements s = sql::lease_statements(plain, t);
  CHECK(s.begin == "START TRANSACTION");
  CHECK(s.begin_release == "START TRANSACTION");
  // The take: the ON CONFLICT upsert, then RETURNING the taken row; no fence without an incarnation.
  CHECK(s.take.text.starts_with("INSERT INTO \"p_locks\" AS l (name, "));
  CHECK(s.take.text.find(" ON CONFLICT (name) DO UPDATE SET ") != std::string::npos);
  CHECK(s.take.text.ends_with(" RETURNING token, MS(acquired_at), MS(expires_at)"));
  CHECK(s.taken.empty());
  CHECK(s.lock_row.text == "SELECT 1 FROM \"p_locks\" WHERE name = :key FOR UPDATE");
  CHECK(s.header_take.text.find("CASE WHEN l.strategy = 'semaphore' THEN") != std::string::npos);
  // No server sessions: `dblock release` answers nothing and ends none.
  CHECK(sql::release_statements(plain, t).holder.empty());
  CHECK(s.session_take.empty());
  // With server sessions, the session strategies number the row with core's upsert and its
  // RETURNING, the condition on the inserted row's time.
  sql::Dialect sessions = plain;
  sessions.session_id = "SESSION";
  const sql::Statement numbered = sql::lease_statements(sessions, t).session_take;
  CHECK(numbered.id == "session.take");
  CHECK(numbered.text == sql::numbered_upsert_sql(sessions, t, "", "NOW"));
  CHECK(numbered.text.find(" ON CONFLICT (name) DO UPDATE SET ") != std::string::npos);
  CHECK(numbered.text.find("l.expires_at <= EXCLUDED.acquired_at") != std::string::npos);
  CHECK(numbered.text.ends_with(" RETURNING token, MS(acquired_at), NULL"));
  // Another upsert, without RETURNING: its token read back by `taken`.
  sessions.upsert = [](const sql::Upsert& u) { return "UPSERT " + u.table + " WHEN " + u.when(""); };
  sessions.returning = [](std::string_view) { return std::string(); };
  CHECK(sql::lease_statements(sessions, t).session_take.text.starts_with("UPSERT \"p_locks\" WHEN (strategy IS NULL OR strategy <> 'semaphore') AND "));
  CHECK(sql::lease_statements(sessions, t).session_take.text.find("expires_at <= NOW") != std::string::npos);

  // The session strategies' txn-insert: a plain INSERT unless the dialect writes its own.
  const sql::LockStatements l = sql::lock_statements(plain, t, {});
  CHECK(l.insert_claim.text == "INSERT INTO \"p_claims\" (name, kind) VALUES (:key, :kind)");
  sql::LockStatements own;
  own.insert_claim = {"lock.insert_claim", "INSERT OWN"};
  CHECK(sql::lock_statements(plain, t, own).insert_claim.text == "INSERT OWN");
}

namespace {

// The marked dialect with a session lock whose every expression is marked, and a clock.
sql::Dialect with_session_lock() {
  sql::Dialect d = marked;
  d.clock = "CLOCK";
  d.unsynced_commit = "UNSYNCED";  // a statement's parts may write
  d.session_lock = {
      .lock = [](std::string_view key, bool wait) { return (wait ? "WAIT(" : "TRY(") + std::string(key) + ")"; },
      .bound = "BOUND(:lock_timeout)",
      .unlock = [](std::string_view key) { return "UNLOCK(" + std::string(key) + ")"; },
      .unlock_all = "UNLOCK_ALL",
      .holds = [](std::string_view key) { return "HELD(" + std::string(key) + ")"; },
  };
  return d;
}

}  // namespace

TEST_CASE("the advisory statements: written once over the dialect's session lock, on the key's hash by default") {
  const Tables t("p_", '"');
  const sql::Dialect d = with_session_lock();
  const sql::LockStatements s = sql::lock_statements(d, t, {});
  CHECK(s.advisory_try.id == "lock.advisory_try");
  CHECK(s.advisory_try.text == "SELECT TRY(:lock) AS got, CLOCK AS at");
  // The wait's bound in its FROM, evaluated first.
  CHECK(s.advisory_wait.text == "SELECT WAIT(:lock) AS got, CLOCK AS at FROM (SELECT BOUND(:lock_timeout)) c");
  CHECK(s.advisory_holds.text == "SELECT HELD(:lock)");
  CHECK(s.advisory_give_back.text == "SELECT ours, UNLOCK_ALL FROM (SELECT UNLOCK(:lock) AS ours OFFSET 0) u");
  CHECK(s.lock_wait.id == "lock.lock_timeout");
  CHECK(s.lock_wait.text == "SELECT BOUND(:lock_timeout)");
  // Numbered in the lock's statement, the row's time the grant's (k.at), read back by RETURNING.
  CHECK(s.advisory_numbered_wait.text ==
        "WITH k AS (" + s.advisory_wait.text + "), a AS (" +
            sql::on_conflict_upsert(sql::session_upsert(d, t, ":fence", "k.at", "EXCLUDED.acquired_at"),
                                    " FROM k WHERE k.got") +
            " RETURNING token, MS(acquired_at), NULL) SELECT a.*, k.got FROM k LEFT JOIN a ON true");
  // The try reads the failover gate itself (where the dialect has an incarnation): the lock
  // is asked for only on the gate's row, the token above its fence, and the flag says 2 when
  // the gate did not open (nothing locked, nothing numbered).
  CHECK(s.advisory_numbered_try.text.starts_with("WITH g AS (SELECT COALESCE(:fence, token) AS fence FROM " + t.locks +
                                                 " WHERE name = :record AND (:fence IS NOT NULL OR "));
  CHECK(s.advisory_numbered_try.text.find("), k AS (" + s.advisory_try.text + " FROM g), a AS (INSERT INTO") !=
        std::string::npos);
  CHECK(s.advisory_numbered_try.text.find("(SELECT fence FROM g)") != std::string::npos);
  // Refused, the key's row (joined as r) as the refusal reads it: no read of its own.
  CHECK(s.advisory_numbered_try.text.find(" SELECT a.*, COALESCE(CAST(k.got AS int), 2), r.name, r.owner,") !=
        std::string::npos);
  CHECK(s.advisory_numbered_try.text.ends_with(" FROM (SELECT 1) o LEFT JOIN k ON true LEFT JOIN a ON true LEFT JOIN " +
                                               t.locks + " r ON NOT k.got AND r.name = :key"));
  // Released: the row, then the lock given back (after the release: it reads u), then the history row.
  CHECK(s.advisory_released.id == "lock.advisory_released");
  CHECK(s.advisory_released.text.find("g AS MATERIALIZED (SELECT ours, UNLOCK_ALL FROM (SELECT UNLOCK(:lock) AS"
                                      " ours FROM (SELECT count(*) FROM u) r OFFSET 0) x)") != std::string::npos);
  CHECK(s.advisory_released.text.find("CASE WHEN (SELECT ours FROM g) THEN :outcome ELSE 'lost' END") != std::string::npos);

  // A statement the dialect writes its own is kept; a key of the dialect's own.
  sql::Dialect named = d;
  named.session_lock.key = [](const Tables& tables, std::string_view name) {
    return "NAME(" + tables.prefix + ", " + std::string(name) + ")";
  };
  named.session_lock.unlock_all = {};
  sql::LockStatements own;
  own.advisory_wait = {"lock.advisory_take", "OWN WAIT"};
  const sql::LockStatements n = sql::lock_statements(named, t, own);
  CHECK(n.advisory_wait.text == "OWN WAIT");
  CHECK(n.advisory_holds.text == "SELECT HELD(NAME(p_, :key))");
  CHECK(n.advisory_give_back.text == "SELECT UNLOCK(NAME(p_, :key))");
  CHECK(n.advisory_numbered_wait.text.starts_with("WITH k AS (OWN WAIT), a AS ("));

  // The queue: the same wait, on the key given.
  const sql::QueueStatements q = sql::queue_statements(d, ":lock");
  CHECK(q.wait.id == "queue.wait");
  CHECK(q.wait.text == s.advisory_wait.text);
  CHECK(q.leave.text == "SELECT UNLOCK(:lock)");

  // With a lock held to the transaction's end, txn-insert's claim queues on the key's (:hi and
  // :lo) ahead of its INSERT, and tries it where it must not wait: one statement, a row answered
  // when taken; a schema's DDL takes turns on one.
  sql::Dialect held = d;
  held.session_lock.transaction_lock = [](std::string_view key, bool wait) {
    return std::string(wait ? "XWAIT(" : "XTRY(") + std::string(key) + ")";
  };
  CHECK(sql::lock_statements(held, t, {}).insert_claim.text ==
        "INSERT INTO \"p_claims\" (name, kind) SELECT :key, :kind WHERE CASE WHEN :wait_ms > 0 THEN XWAIT(:hi, :lo)"
        " ELSE XTRY(:hi, :lo) END RETURNING name");
  BackendOptions options;
  options.table_prefix = "p_";
  const sql::tables::SchemaDialect sd{.quote = '"', .type = [](sql::tables::Type) { return std::string("T"); }};
  constexpr Strategy lease_only[] = {Strategy::lease};
  CHECK(sql::schema_statements(held, sd, options, "test", lease_only).begin ==
        "BEGIN; SELECT XWAIT(" + std::to_string(key_hash("p_", "\x01schema")) + ")");
  CHECK(sql::schema_statements(d, sd, options, "test", lease_only).begin.empty());
  CHECK(sql::lock_statements(d, t, {}).insert_claim.text == "INSERT INTO \"p_claims\" (name, kind) VALUES (:key, :kind)");

  // Without a session lock, none of them.
  const sql::LockStatements none = sql::lock_statements(marked, t, {});
  CHECK(none.advisory_try.empty());
  CHECK(none.advisory_wait.empty());
  CHECK(none.advisory_holds.empty());
  CHECK(none.advisory_give_back.empty());
  CHECK(none.advisory_numbered_try.empty());
  CHECK(none.advisory_released.empty());
  CHECK(none.lock_wait.empty());
  CHECK(sql::queue_statements(marked, "K").wait.empty());
}

TEST_CASE("a session lock's holder judged as status judges it, and the row lock's numbering gate, over the session lock") {
  const Tables t("p_", '"');
  sql::Dialect d = with_session_lock();
  // The row lock's numbering proven in the statement (status's judgement of a holder), and the
  // gate that chains it to the grant: the holder's own lock, :gate, bound, never a number.
  const sql::LockStatements s = sql::lock_statements(d, t, {});
  REQUIRE_FALSE(s.row_numbered.empty());
  CHECK(s.gate_take.text == "SELECT WAIT(:gate) AS got");
  CHECK(s.gate_give.text == "SELECT UNLOCK(:gate)");
  // Waited for within the bound and given back at once, after the wait (kept apart by OFFSET 0).
  CHECK(s.gate_wait.id == "lock.gate_wait");
  CHECK(s.gate_wait.text ==
        "SELECT got, UNLOCK(:gate) FROM (SELECT WAIT(:gate) AS got FROM (SELECT BOUND(:lock_timeout)) c OFFSET 0) g");
  // No bound of its own (the wait takes it as a parameter, :wait_ms, as MySQL's GET_LOCK): the
  // same gate, its wait first in the select list (evaluated left to right), the give-back after
  // it. No row numbering: no gate.
  sql::Dialect unbounded = d;
  unbounded.session_lock.bound = {};
  const sql::LockStatements u = sql::lock_statements(unbounded, t, {});
  CHECK(u.gate_take.text == s.gate_take.text);
  CHECK(u.gate_wait.text == "SELECT WAIT(:gate) AS got, UNLOCK(:gate)");
  CHECK(u.gate_give.text == s.gate_give.text);
  CHECK(sql::lock_statements(marked, t, {}).gate_take.empty());

  // Without SessionLock::holds or holder, the heartbeat's proof is status's judgement of the
  // key's row as this session records it.
  d.session_lock.holds = nullptr;
  CHECK(sql::lock_statements(d, t, {}).advisory_holds.text ==
        "SELECT HOLDS(s., p_) FROM (SELECT :key AS name, 'advisory' AS strategy, CAST(SESSION AS VARCHAR(64)) AS"
        " session_id) s");

  // `dblock release`'s wait for an ended holder: the server no longer shows :session holding
  // the key's lock, judged so on the key's row; none where there are no server sessions.
  const sql::ReleaseStatements r = sql::release_statements(marked, t);
  CHECK(r.session_gone.id == "release.session_gone");
  CHECK(r.session_gone.text == "SELECT CASE WHEN EXISTS (SELECT 1 FROM (SELECT name, strategy, :session AS session_id"
                               " FROM \"p_locks\" WHERE name = :key) l WHERE HOLDS(l., p_) = 1) THEN 0 ELSE 1 END");
  sql::Dialect no_sessions = marked;
  no_sessions.ended_session = [](std::string_view, const Tables&) { return std::string(); };
  CHECK(sql::release_statements(no_sessions, t).session_gone.empty());
  // Where the server tells a lock's holder (SessionLock::holder, MySQL's), on the lock the release
  // named (:lock): no longer held by :session.
  sql::Dialect told = marked;
  told.session_lock.holder = [](std::string_view key) { return "HOLDER(" + std::string(key) + ")"; };
  CHECK(sql::release_statements(told, t).session_gone.text ==
        "SELECT CASE WHEN HOLDER(:lock) = :session THEN 0 ELSE 1 END");
}

TEST_CASE("a lease judged live at the time a statement gives: the dialect's now by default, another in a dialect copy") {
  sql::Dialect d = marked;
  d.lease_live = [](std::string_view row, std::string_view now) {
    return "LIVE(" + std::string(row) + ", " + std::string(now) + ")";
  };
  const Tables t("p_", '"');
  CHECK(sql::lease_statements(d, t).refusal.text.find("LIVE(, NOW)") != std::string::npos);
  d.now = "STATEMENT";
  d.unsynced_commit = "UNSYNCED";
  const sql::Statement release = sql::lease_statements(d, t).release;
  const std::string recorded = sql::release_recorded(d, t, release, "x").text;
  CHECK(recorded.find("NOW") == std::string::npos);
  CHECK(recorded.find("STATEMENT") != std::string::npos);
  CHECK(sql::header_free_sql(d, "l.", t.locks).find("LIVE(s., STATEMENT)") != std::string::npos);
}

TEST_CASE("a table by its own name, and the failover gate's conditions to AND with others") {
  const Tables t("p_", '`');
  CHECK(t.locks == "`p_locks`");
  CHECK(t.unquoted("locks") == "p_locks");
  CHECK(t.unquoted("claims") == "p_claims");
  // A take that reads the catalog is given its table's own name.
  sql::Dialect catalog = marked;
  catalog.take = [](const sql::Take& k) { return k.table_name; };
  CHECK(sql::lease_statements(catalog, Tables("a`b_", '`')).take.text == "a`b_locks");
  CHECK(sql::failover_open_sql(marked, "r.", "HERE") == "(" + sql::failover_open_conditions(marked, "r.", "HERE") + ")");
  CHECK(sql::failover_open_conditions(marked, "r.", "HERE") == "HERE AND NOT LIVE(r.) AND r.pid >= :ttl_ms");
}

TEST_CASE("where the server tells a lock's holder: a second take answers NULL, and waiters hear a release by the lock") {
  const Tables t("p_", '`');
  sql::Dialect d = marked;
  d.session_lock = {
      .key = [](const Tables& tables, std::string_view name) { return "NAME(" + tables.prefix + std::string(name) + ")"; },
      .lock = [](std::string_view key, bool wait) { return (wait ? "WAIT(" : "TRY(") + std::string(key) + ")"; },
      .unlock = [](std::string_view key) { return "UNLOCK(" + std::string(key) + ")"; },
      .holder = [](std::string_view key) { return "HOLDER(" + std::string(key) + ")"; },
  };
  const sql::LockStatements s = sql::lock_statements(d, t, {});
  CHECK(s.advisory_wait.text == "SELECT CASE WHEN HOLDER(NAME(p_:key)) = SESSION THEN NULL ELSE WAIT(NAME(p_:key)) END AS got");
  // Its wait takes its bound as a parameter (no SessionLock::bound): the wait of 0 is the try.
  CHECK(s.advisory_try.empty());
  CHECK(s.advisory_holds.text == "SELECT CASE WHEN HOLDER(NAME(p_:key)) = SESSION THEN 1 ELSE 0 END");
  CHECK(s.advisory_give_back.text == "SELECT UNLOCK(NAME(p_:key))");
  // The lease's release that gives the lock back, named from the row's own name.
  CHECK(s.advisory_release_row.id == "lock.advisory_release_row");
  CHECK(s.advisory_release_row.text ==
        sql::lease_statements(d, t).release.text + " AND UNLOCK(NAME(p_name))");
  CHECK(s.advisory_numbered_wait.empty());  // no clock: a waited lock numbers no row in its statement
  // A dialect that writes its own take writes its own take without waiting, or none.
  sql::LockStatements own;
  own.advisory_wait = {"lock.advisory_take", "OWN"};
  sql::Dialect bounded = d;
  bounded.session_lock.bound = "BOUND";
  CHECK(sql::lock_statements(bounded, t, {}).advisory_try.text ==
        "SELECT CASE WHEN HOLDER(NAME(p_:key)) = SESSION THEN NULL ELSE TRY(NAME(p_:key)) END AS got");
  CHECK(sql::lock_statements(bounded, t, own).advisory_try.empty());

  const sql::WakeStatements w = sql::wake_statements(d, t);
  CHECK(w.wake_hold.text == "SELECT TRY(:wake), UNLOCK(:queue)");
  CHECK(w.wake_release.text == "SELECT UNLOCK(:wake), UNLOCK(:queue)");
  CHECK(w.wake_wait.text ==
        "SELECT CASE WHEN HOLDER(:queue) = SESSION THEN CASE WHEN HOLDER(:wake) IS NOT NULL AND COALESCE(WAIT(:wake),"
        " 0) = 1 THEN 1 ELSE 0 * COALESCE(UNLOCK(:queue), 0) END ELSE COALESCE(WAIT(:queue), 0) = 1 END, UNLOCK(:wake)");
  CHECK(w.taken_holding.text ==
        sql::taken_sql(d, t, ", CASE WHEN :take_wake = 1 THEN TRY(:wake) END, UNLOCK(:queue)"));
  // The wait ahead of a lease take goes with it in one block: none where the dialect runs none.
  CHECK(w.wait_ahead.empty());
  d.block = [](std::string_view variables, std::string_view body) { return "BLOCK " + std::string(variables) + std::string(body); };
  CHECK(sql::wake_statements(d, t).wait_ahead.text ==
        "SELECT CASE WHEN HOLDER(:queue) = :head THEN WAIT(:wake) END AS got, UNLOCK(:wake)");
  // None where the server does not tell the holder.
  CHECK(sql::wake_statements(with_session_lock(), t).wake_wait.empty());
}

TEST_CASE("session.take is the dialect's take: the numbering, nothing said of a row left alone, the handshake's session") {
  const Tables t("p_", '`');
  sql::Dialect d = marked;
  d.session_lock = {
      .lock = [](std::string_view key, bool wait) { return (wait ? "WAIT(" : "TRY(") + std::string(key) + ")"; },
      .unlock = [](std::string_view key) { return "UNLOCK(" + std::string(key) + ")"; },
      .holder = [](std::string_view key) { return "HOLDER(" + std::string(key) + ")"; },
  };
  // Each member as the take is given it; no member says which take it is.
  d.take = [](const sql::Take& k) {
    std::string out = k.refused ? "REFUSED(" + k.refused("r.").substr(0, 6) + ")" : "SILENT";
    for (const auto& c : k.returning) out += " COLUMN(" + c + ")";
    for (const auto& c : k.then) out += " THEN(" + c + ")";
    return out + " IF(" + k.then_if + ") HANDSHAKE(" + k.handshake + ") FROM " + k.table_name + " " + k.upsert("G").values[0].first;
  };
  const sql::LeaseStatements s = sql::lease_statements(d, t);
  CHECK(s.take.text == "REFUSED(r.name) COLUMN(token) COLUMN(MS(acquired_at)) COLUMN(MS(expires_at)) THEN(TRY(:wake))"
                       " THEN(UNLOCK(:queue)) IF(:token IS NULL) HANDSHAKE() FROM p_locks name");
  CHECK(s.session_take.id == "session.take");
  CHECK(s.session_take.text == "SILENT COLUMN(token) COLUMN(MS(acquired_at)) COLUMN(NULL) THEN(UNLOCK(:queue)) IF()"
                               " HANDSHAKE(SESSION = :started_id) FROM p_locks name");
  // The session's upsert, its tokens above the fence the take gives.
  d.take = [](const sql::Take& k) { return k.refused ? std::string() : sql::on_conflict_upsert(k.upsert("G.fence")); };
  CHECK(sql::lease_statements(d, t).session_take.text.find("COALESCE(:token, G.fence + 1), :strategy") != std::string::npos);
  // Core's form where the dialect's take is its own only for the lease (PostgreSQL's): its
  // upsert and RETURNING, as numbered_upsert_sql writes it.
  d.take = [](const sql::Take& k) { return k.refused ? std::string("OWN") : k.standard; };
  CHECK(sql::lease_statements(d, t).session_take.text == sql::numbered_upsert_sql(d, t, "", "NOW"));
  // No wake by the session lock: nothing to do once taken.
  d.session_lock = {};
  d.take = [](const sql::Take& k) { return std::to_string(k.then.size()); };
  CHECK(sql::lease_statements(d, t).take.text == "0");
  CHECK(sql::lease_statements(d, t).session_take.text == "0");
}

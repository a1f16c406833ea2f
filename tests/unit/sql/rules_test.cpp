// The rules core spells once for every dialect (core/sql/rules.hpp), rendered through a
// dialect's expressions: here a made-up dialect whose every expression is marked.
#include <doctest/doctest.h>

#include "core/sql/rules.hpp"

using namespace dblock;

namespace {

const sql::Dialect marked{
    .now = "NOW",
    .time_of_ms = [](std::string_view ms) { return "TIME(" + std::string(ms) + ")"; },
    .integer = [](std::string_view param) { return "INT(" + std::string(param) + ")"; },
    .started_ms_ago = [](std::string_view row,
                         std::string_view now) { return "AGO(" + std::string(row) + ", " + std::string(now) + ")"; },
    .lease_live = [](std::string_view row) { return "LIVE(" + std::string(row) + ")"; },
    .same = [](std::string_view a, std::string_view b) { return "SAME(" + std::string(a) + ", " + std::string(b) + ")"; },
};

}  // namespace

TEST_CASE("--min-interval's due check: none asked, never started, or started at least that long ago") {
  CHECK(sql::due_sql(marked, "l.", "AT") ==
        "(INT(:min_interval_ms) <= 0 OR l.last_started_at IS NULL OR AGO(l., AT) >= INT(:min_interval_ms))");
  CHECK(sql::due_in_ms_sql(marked, "") ==
        "CASE WHEN INT(:min_interval_ms) > 0 AND last_started_at IS NOT NULL THEN INT(:min_interval_ms) - AGO(, NOW)"
        " END");
}

TEST_CASE("the history statements: one each, in the dialect's time and integer expressions") {
  const sql::HistoryStatements h = sql::history_statements(marked, "R");
  CHECK(h.add.id == "history.add");
  CHECK(h.add.text ==
        "INSERT INTO R (name, token, owner, host, pid, strategy, started_at, finished_at, outcome, exit_code) VALUES"
        " (:name, INT(:token), :owner, :host, INT(:pid), :strategy, TIME(INT(:started_ms)), NOW, :outcome,"
        " INT(:exit_code))");
  CHECK(h.oldest.text == "SELECT token FROM R WHERE name = :name ORDER BY id LIMIT 1");
  CHECK(h.trim.text == "DELETE FROM R WHERE name = :name AND id <= (SELECT id FROM (SELECT id FROM R WHERE name ="
                       " :name ORDER BY id DESC LIMIT 1 OFFSET INT(:keep)) AS cutoff)");
}

TEST_CASE("fencing tokens: the one given, else one above the row's last and the failover fence") {
  CHECK(sql::first_token_sql(marked, true, "F") == "COALESCE(INT(:token), F + 1)");
  CHECK(sql::next_token_sql(marked, "l.", true, "F") == "COALESCE(INT(:token), GREATEST(l.token, F) + 1)");
  // No fence (SQLite; ShedLock's numbering) and no token given (a semaphore's header).
  CHECK(sql::first_token_sql(marked, false, "") == "1");
  CHECK(sql::next_token_sql(marked, "", false, "") == "token + 1");
  CHECK(sql::next_token_sql(marked, "", false, "F") == "GREATEST(token, F) + 1");
}

TEST_CASE("a semaphore's header: its slot count, or no slot held on a recount; any other row when nobody holds it") {
  CHECK(sql::header_free_sql(marked, "l.", "L") ==
        "CASE WHEN SAME(l.strategy, 'semaphore') THEN l.slots = INT(:slots) OR INT(:recount) = 1 AND NOT EXISTS (SELECT"
        " 1 FROM (SELECT 1 FROM L s WHERE s.name > :first AND s.name < :past AND s.released_at IS NULL AND (NOT"
        " SAME(s.strategy, 'lease') OR LIVE(s.)) LIMIT 1) AS held) ELSE l.acquired_at IS NULL OR NOT LIVE(l.) AND"
        " (l.released_at IS NOT NULL OR l.strategy = 'lease') END");
}

TEST_CASE("the failover gate: the record names this server, no lock-delay in force, the TTL covered") {
  CHECK(sql::failover_delayed_sql(marked, "r.") == "LIVE(r.)");
  CHECK(sql::failover_covers_sql(marked, "r.") == "r.pid >= INT(:ttl_ms)");
  CHECK(sql::failover_open_sql(marked, "", "here") == "(here AND NOT LIVE() AND pid >= INT(:ttl_ms))");
}

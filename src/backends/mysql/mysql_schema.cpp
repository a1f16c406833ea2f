// Table names and the statements on <prefix>locks / <prefix>runs the session strategies share.
#include <algorithm>
#include <charconv>
#include <map>

#include "backends/common/dsn.hpp"
#include "backends/common/identifiers.hpp"
#include "backends/common/lock_rows.hpp"
#include "backends/mysql/mysql_error.hpp"
#include "backends/mysql/mysql_tables.hpp"
#include "core/semaphore.hpp"

namespace dblock::mysql {
namespace {

std::int64_t to_i64(const Value& v) {
  std::int64_t out = 0;
  if (v) std::from_chars(v->data(), v->data() + v->size(), out);
  return out;
}

std::string epoch_ms_of(std::string_view expr) { return epoch_ms(std::string(expr)); }

// A result row as the common row layer reads it.
class MysqlRow final : public rows::ColumnReader {
 public:
  explicit MysqlRow(const Row& r) : r_(r) {}
  bool is_null(int column) const override { return !r_.at(column); }
  std::string text(int column) const override { return r_.at(column).value_or(""); }
  std::int64_t int64(int column) const override { return to_i64(r_.at(column)); }

 private:
  const Row& r_;
};

Sql status_columns(const Tables& t) {
  // What the server says about the holder, after the common columns: is a lease live, does
  // the recorded session still hold the key (holder_of_row: the server's own lock state).
  Sql columns(rows::status_select_list(&epoch_ms_of, "NOW(6)") + ", COALESCE(expires_at > NOW(6), 0), ");
  return columns.add(holder_of_row(t)).add(" IS NOT NULL");
}

LockStatus to_status(const Row& r) {
  const MysqlRow row(r);
  return rows::read_status(row, {.lease_live = to_i64(r.at(rows::status_column_count)) == 1,
                                 .session_holds = to_i64(r.at(rows::status_column_count + 1)) == 1});
}

}  // namespace

Tables make_tables(const std::string& prefix) {
  return Tables{prefix, quote_identifier(prefix + "locks", '`'), quote_identifier(prefix + "runs", '`'),
                quote_identifier(prefix + "claims", '`')};
}

Result<void> repair_schema(Connection& conn, const Tables& t, const Error& failed) {
  Session session(conn, t.prefix);
  BackendOptions options;
  options.table_prefix = t.prefix;
  session.set_schema(std::make_shared<const sql::SchemaStatements>(schema_statements(options)));
  auto repaired = session.repair_schema(failed);
  if (!repaired) return std::unexpected(repaired.error());
  if (!*repaired) return std::unexpected(failed);
  return {};
}

std::string epoch_ms(const std::string& expr) {
  return "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', " + expr + ") DIV 1000)";
}

Sql due_condition(std::int64_t min_interval_us) {
  return Sql("(? = 0 OR last_started_at IS NULL OR last_started_at <= NOW(6) - INTERVAL ? MICROSECOND)",
             min_interval_us, min_interval_us);
}

namespace {

// `label` + the first `digits` hex digits of SHA-256 over database, prefix and key (`key`: SQL
// for the key, a column or a bound value), with `tail` appended: one key's lock names.
// All parts as bytes: a key's UTF-8 must not meet the database name's collation.
Sql hashed_name(const Tables& t, std::string_view label, int digits, const Sql& key, const Sql& tail = Sql()) {
  Sql q("CONCAT('" + std::string(label) + "', LEFT(SHA2(CONCAT(CAST(DATABASE() AS BINARY), 0x00, CAST(? AS BINARY), 0x00, CAST(",
        t.prefix);
  q.add(key).add(" AS BINARY)), 256), " + std::to_string(digits) + ")");
  if (!tail.text().empty()) q.add(", ").add(tail);
  return q.add(")");
}

// The holder tag's name: "dblock-held:" + 20 hex digits of the key's hash + the 32 hex digits
// of the holding session's random tag, 64 characters (the server's limit).
Sql holder_tag_name(const Tables& t, const Sql& key, const Sql& tag) { return hashed_name(t, "dblock-held:", 20, key, tag); }

}  // namespace

Sql advisory_name_of_column(const Tables& t, const std::string& key_column) {
  return hashed_name(t, "dblock:", 57, Sql(key_column));
}

Sql wake_name(const Tables& t, std::string_view key) { return hashed_name(t, "dblock-wake:", 52, Sql("?", key)); }

Sql queue_name(const Tables& t, std::string_view key) { return hashed_name(t, "dblock-queue:", 51, Sql("?", key)); }

Sql holder_tag(const Tables& t, std::string_view key, std::string_view tag) {
  return holder_tag_name(t, Sql("?", key), Sql("?", tag));
}

Sql holder_lock_of_row(const Tables& t) {
  // session_id is "<connection id>" (advisory: the key's own GET_LOCK is the evidence) or
  // "<connection id>:<tag>" (for-update, txn-insert: the holder also holds the tag's name,
  // which names this key). A connection id alone proves nothing: the server hands it out again
  // after a restart. A tag copied from another key's row names a lock nobody holds.
  Sql q("CASE WHEN strategy = 'advisory' AND session_id REGEXP '^[0-9]{1,20}$' THEN ");
  q.add(advisory_name_of_column(t, "name"));
  q.add(" WHEN strategy IN ('for-update', 'txn-insert') AND session_id REGEXP '^[0-9]{1,20}:[0-9a-f]{32}$' THEN ");
  q.add(holder_tag_name(t, Sql("name"), Sql("SUBSTRING_INDEX(session_id, ':', -1)")));
  return q.add(" END");
}

Sql holder_of_row(const Tables& t) {
  const std::string id = "CAST(SUBSTRING_INDEX(session_id, ':', 1) AS UNSIGNED)";
  return Sql("IF(IS_USED_LOCK(").add(holder_lock_of_row(t)).add(") = " + id + ", " + id + ", NULL)");
}

Sql release_wake(const Tables& t, std::string_view key) {
  return Sql("DO RELEASE_LOCK(").add(wake_name(t, key)).add("), RELEASE_LOCK(").add(queue_name(t, key)).add(")");
}

Result<void> leave_queue(Connection& conn, const Tables& t, std::string_view key) {
  auto r = conn.execute(Sql("DO RELEASE_LOCK(").add(queue_name(t, key)).add(")"));
  if (!r) return std::unexpected(r.error());
  return {};
}

Sql next_token_taking_wake(const Tables& t, std::string_view key, std::optional<std::int64_t> header_token) {
  Sql q;
  if (header_token)
    q.add("LAST_INSERT_ID(? + 0 * COALESCE(GET_LOCK(", *header_token);
  else
    q.add("LAST_INSERT_ID(token + 1 + 0 * COALESCE(GET_LOCK(");
  q.add(wake_name(t, key)).add(", ?), 0)", wake_grab_s);
  return q.add(" + 0 * COALESCE(RELEASE_LOCK(").add(queue_name(t, key)).add("), 0))");
}

Result<void> take_wake(Connection& conn, const Tables& t, std::string_view key) {
  Sql q("SELECT GET_LOCK(");
  q.add(wake_name(t, key)).add(", ?), RELEASE_LOCK(", wake_grab_s).add(queue_name(t, key)).add(")");
  auto r = conn.execute(q);
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

Sql advisory_name(const Tables& t, std::string_view key) { return hashed_name(t, "dblock:", 57, Sql("?", key)); }

Result<std::optional<LockStatus>> read_lock(Connection& conn, const Tables& t, const std::string& key) {
  auto result = conn.execute(Sql("SELECT ").add(status_columns(t)).add(" FROM " + t.locks + " WHERE name = ?", key));
  if (!result) return std::unexpected(result.error());
  if (result->rows.empty()) return std::optional<LockStatus>();
  return std::optional<LockStatus>(to_status(result->rows.front()));
}

Sql history_insert(const Tables& t, const RunRecord& run, const Sql& outcome, std::string_view lock_row) {
  Sql insert("INSERT INTO " + t.runs +
             " (name, token, owner, host, pid, strategy, started_at, finished_at, outcome, exit_code) ");
  insert.add("SELECT ?, ?, ?, ?, ?, ?, ", run.key, run.token, run.owner, run.host, run.pid, run.strategy);
  insert.add("COALESCE((SELECT acquired_at FROM " + t.locks + " WHERE name = ? AND token = ?), NOW(6)), NOW(6), ",
             lock_row.empty() ? std::string_view(run.key) : lock_row, run.token);
  return insert.add(outcome).add(", ?", run.exit_code);
}

Sql history_prune(const Tables& t, const std::string& key, int keep) {
  // The derived table lets MySQL read the table it deletes from. The cutoff is found on the
  // (name, id) index, newest first.
  Sql prune("DELETE FROM " + t.runs + " WHERE name = ?", key);
  prune.add(" AND id <= (SELECT id FROM (SELECT id FROM " + t.runs + " WHERE name = ? ORDER BY id DESC LIMIT 1 OFFSET ?) AS cutoff)",
            key, keep);
  return prune;
}

Sql history_prune_block(const Tables& t, const std::string& key, int keep) {
  // The cutoff is read first and the DELETE is then a range on the (name, id) index. As one
  // statement (history_prune) MariaDB examines every row of the key for the DELETE as well:
  // 5.2 ms against 1.1 ms at keep 1000 with 10^6 rows, most of a run's time on a busy key.
  Sql prune("BEGIN DECLARE cutoff BIGINT; SET cutoff = (SELECT id FROM " + t.runs +
                " WHERE name = ? ORDER BY id DESC LIMIT 1 OFFSET ?); ",
            key, keep);
  return prune.add("DELETE FROM " + t.runs + " WHERE name = ? AND id <= cutoff; END", key);
}

Result<void> write_history(Connection& conn, const Tables& t, const RunRecord& run, int keep, std::string_view lock_row) {
  auto inserted = conn.execute(history_insert(t, run, Sql("?", to_string(run.outcome)), lock_row));
  if (!inserted) return std::unexpected(inserted.error());
  auto pruned = conn.execute(history_prune(t, run.key, keep));
  if (!pruned) return std::unexpected(pruned.error());
  return {};
}

Result<Millis> due_in(Connection& conn, const Tables& t, const std::string& key, Millis min_interval) {
  Sql sql("SELECT GREATEST(0, " + epoch_ms("last_started_at + INTERVAL ? MICROSECOND") + " - " + epoch_ms("NOW(6)") + ")",
          micros(min_interval));
  auto rows = conn.execute(sql.add(" FROM " + t.locks + " WHERE name = ?", key));
  if (!rows) return std::unexpected(rows.error());
  if (rows->rows.empty() || !rows->rows.front()[0]) return Millis(0);
  return Millis(to_i64(rows->rows.front()[0]));
}

Sql holder_insert(const Tables& t, const LockRequest& req, std::optional<std::int64_t> header_token) {
  Sql q("INSERT INTO " + t.locks +
            " (name, owner, host, pid, token, strategy, session_id, acquired_at, renewed_at, expires_at, released_at, "
            "last_started_at) VALUES (?, ?, ?, ?, ",
        req.key, req.owner, req.host, req.pid);
  if (header_token) return q.add("?", *header_token);
  return q.add("1");
}

Sql assign_if(const Sql& cond, const std::string& column, const std::string& value) {
  Sql q(column + " = IF(");
  return q.add(cond).add(", " + value + ", " + column + ")");
}

namespace {

// The header's upsert. The update takes the row only when the condition holds, each column
// IF(cond, new, old), ordered so that the condition reads the same after every assignment
// (MySQL assigns left to right, each seeing the ones before; MariaDB may assign from the old
// row): what it reads (slots, strategy, then the plain row's times) is assigned last, and once
// slots = N and strategy = 'semaphore' its first branch holds. Affected rows say what happened
// (1 inserted with token 1, 2 taken, the new token in LAST_INSERT_ID, 0 left alone).
Sql header_statement(const Tables& t, const LockRequest& req) {
  Sql q("INSERT INTO " + t.locks +
            " (name, owner, host, pid, token, strategy, session_id, acquired_at, renewed_at, expires_at, released_at, "
            "last_started_at, slots) VALUES (?, ?, ?, ?, 1, 'semaphore', NULL, NOW(6), NOW(6), '9999-12-31 23:59:59', "
            "NULL, NOW(6), ?) ON DUPLICATE KEY UPDATE ",
        req.semaphore, req.owner, req.host, req.pid, req.slots);
  // Its own count, or an idle semaphore (no slot row held: released_at NULL and a session
  // strategy or a live lease; the names between K\x1f and K\x20 are exactly its slot rows, keys
  // hold no control characters); or a plain row nobody holds (never taken, a lease that ran
  // out, a session lock released), which becomes a semaphore and keeps counting its tokens.
  // The slot rows are read through a derived table with LIMIT, which the server materializes:
  // MySQL refuses a subquery that reads the table an INSERT writes (ER_UPDATE_TABLE_USED).
  Sql cond("((strategy <=> 'semaphore' AND (slots <=> ? OR NOT EXISTS (SELECT 1 FROM (SELECT 1 FROM " + t.locks +
               " s WHERE s.name > ? AND s.name < ? AND s.released_at IS NULL AND "
               "(s.strategy <> 'lease' OR s.expires_at > NOW(6)) LIMIT 1) AS held))) OR "
               "(NOT strategy <=> 'semaphore' AND (acquired_at IS NULL OR expires_at <= NOW(6) OR "
               "(expires_at IS NULL AND released_at IS NOT NULL))))",
           req.slots, req.semaphore + '\x1f', req.semaphore + '\x20');
  const std::pair<const char*, const char*> assignments[] = {
      {"owner", "VALUES(owner)"},   {"host", "VALUES(host)"},       {"pid", "VALUES(pid)"},
      {"session_id", "NULL"},       {"renewed_at", "NOW(6)"},       {"last_started_at", "NOW(6)"},
      {"token", "LAST_INSERT_ID(token + 1)"}, {"slots", "VALUES(slots)"}, {"strategy", "'semaphore'"},
      {"acquired_at", "NOW(6)"},    {"released_at", "NULL"},        {"expires_at", "VALUES(expires_at)"}};
  const char* separator = "";
  for (const auto& [column, value] : assignments) {
    q.add(separator).add(assign_if(cond, column, value));
    separator = ", ";
  }
  return q;
}

}  // namespace

Result<std::optional<std::int64_t>> begin_slot(Connection& conn, const Tables& t, const LockRequest& req) {
  if (auto r = conn.query("START TRANSACTION"); !r) return std::unexpected(r.error());
  auto header = conn.execute(header_statement(t, req));
  if (!header || header->affected_rows == 0) {
    (void)conn.query("ROLLBACK");
    if (!header) return std::unexpected(header.error());
    return std::optional<std::int64_t>();
  }
  return std::optional<std::int64_t>(header->affected_rows == 1 ? 1 : static_cast<std::int64_t>(header->insert_id));
}

Result<void> end_slot(Connection& conn, bool commit) { return conn.query(commit ? "COMMIT" : "ROLLBACK"); }

Result<AcquireOutcome> header_busy(Connection& conn, const Tables& t, const LockRequest& req) {
  AcquireOutcome out;
  out.state = AcquireOutcome::State::busy;
  auto row = read_lock(conn, t, req.semaphore);
  if (!row) return std::unexpected(row.error());
  if (!*row) return out;  // gone since (never happens: rows are never deleted)
  if ((*row)->strategy == "semaphore") {
    auto recorded = read_slot_count(conn, t, req.semaphore);
    if (!recorded) return std::unexpected(recorded.error());
    if (*recorded != req.slots && *recorded > 0) {
      out.recorded_slots = *recorded;
      return out;
    }
  }
  out.holder = **row;
  return out;
}

Sql lock_header_of(const Tables& t, std::string_view lock_row) {
  auto slot = parse_slot_row(lock_row);
  if (!slot) return Sql();
  return Sql("SELECT COUNT(*) INTO @dblock_header FROM " + t.locks + " WHERE name = ? FOR UPDATE; ", slot->key);
}

Result<int> read_slot_count(Connection& conn, const Tables& t, const std::string& key) {
  auto rows = conn.execute(Sql("SELECT slots FROM " + t.locks + " WHERE name = ? AND strategy = 'semaphore'", key));
  if (!rows && (is_bad_field(rows.error()) || is_no_such_table(rows.error()))) return 0;
  if (!rows) return std::unexpected(rows.error());
  if (rows->rows.empty()) return 0;
  return static_cast<int>(to_i64(rows->rows.front()[0]));
}

}  // namespace dblock::mysql

// Table names, and the names of the server locks (GET_LOCK) each key's holder and waiters use.
#include <algorithm>
#include <map>

#include "backends/common/dsn.hpp"
#include "backends/common/identifiers.hpp"
#include "backends/common/lock_rows.hpp"
#include "backends/mysql/mysql_error.hpp"
#include "backends/mysql/mysql_tables.hpp"
#include "core/semaphore.hpp"

namespace dblock::mysql {
Tables make_tables(const std::string& prefix) {
  return Tables{prefix, quote_identifier(prefix + "locks", '`'), quote_identifier(prefix + "runs", '`'),
                quote_identifier(prefix + "claims", '`')};
}

std::string epoch_ms(const std::string& expr) {
  return "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', " + expr + ") DIV 1000)";
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

Sql advisory_name(const Tables& t, std::string_view key) { return hashed_name(t, "dblock:", 57, Sql("?", key)); }

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
  q.add(hashed_name(t, "dblock:", 57, Sql("name")));
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

}  // namespace dblock::mysql

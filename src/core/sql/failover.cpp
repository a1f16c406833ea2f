#include "core/sql/failover.hpp"

#include <algorithm>

#include "core/acquire_loop.hpp"
#include "core/duration.hpp"

namespace dblock::sql::failover {
namespace {

Params record_params() { return {{"record", std::string(record_name)}}; }
Params read_params(Millis ttl) { return Params(record_params()).set("ttl_ms", ms_value(ttl)); }

// A row of FailoverStatements::read.
Record record_of(const Rows::Row& row) {
  Record r{row.text(0),           row.text(1),   row.text(2), row.opt_int64(3).value_or(0), row.opt_int64(4),
           row.opt_int64(5).value_or(0), row.opt_int64(6).value_or(0)};
  r.here = row.opt_int64(7).value_or(0) == 1;
  r.delayed = row.opt_int64(8).value_or(0) == 1;
  r.covers = row.opt_int64(9).value_or(0) == 1;
  return r;
}

}  // namespace

std::string describe(std::string_view previous, std::string_view current) {
  return "failover from " + (previous.empty() ? std::string("an unrecorded primary") : std::string(previous)) + " to " +
         std::string(current);
}

std::optional<LockDelay> Record::delay() const {
  if (!delayed || !delay_until_ms) return std::nullopt;
  return LockDelay{describe(previous, recorded), *delay_until_ms, now_ms};
}

Result<std::optional<Record>> read(Session& session, const FailoverStatements& st, Millis ttl) {
  if (st.empty()) return std::nullopt;
  auto r = session.run(st.read, read_params(ttl));
  if (!r) return std::unexpected(r.error());
  if (r->empty()) return fail(ErrorKind::internal, "the failover record read no row");
  return record_of((*r)[0]);
}

namespace {

// A new primary: tokens jump past every token it knows (the old primary may have issued a few
// more that never reached it), and the lock-delay starts. Of two sessions that both see it, one
// moves the record; the other's move does nothing and both read the delay after. The record
// as it is then.
Result<Record> move(Session& session, const FailoverStatements& st, const Record& rec, Millis ttl) {
  auto top = session.run(st.max_token, record_params());
  if (!top) return std::unexpected(top.error());
  const std::int64_t highest = top->empty() ? 0 : (*top)[0].opt_int64(0).value_or(0);
  auto moved = session.run(st.move, Params(record_params()).set("fence", std::max(highest, rec.fence) + token_jump));
  if (!moved) return std::unexpected(moved.error());
  auto again = read(session, st, ttl);
  if (!again) return std::unexpected(again.error());
  if (!*again || (*again)->recorded.empty())
    return fail(ErrorKind::internal, "the failover record vanished while it was moved");
  return **again;
}

}  // namespace

Result<Gate> admit(Session& session, const FailoverStatements& st, Millis ttl, const ReadCheck& check) {
  Gate gate;
  if (st.empty()) return gate;
  auto r = session.run(st.read, read_params(ttl));
  if (!r) return std::unexpected(r.error());
  if (r->empty()) return fail(ErrorKind::internal, "the failover record read no row");
  auto row = (*r)[0];
  // Who serves the session, read with the record rather than asked apart (FailoverStatements::read).
  if (row.columns() > session_column && !row.is_null(session_column) && row.int64(session_column) == session.started_id())
    session.served_directly_seen();
  if (check)
    if (auto ok = check(session, row); !ok) return std::unexpected(ok.error());
  if (row.is_null(0)) {
    // The first grant on this database: nothing to fence, no holder to wait for. Two first
    // acquirers race harmlessly, the second insert doing nothing.
    auto created = session.run(st.create, Params(record_params()).set("ttl_ms", ms_value(ttl)));
    if (!created) return std::unexpected(created.error());
    gate.changed = true;
    return gate;
  }
  Record rec = record_of(row);
  if (!rec.here) {
    auto moved = move(session, st, rec, ttl);
    if (!moved) return std::unexpected(moved.error());
    rec = *moved;
  }
  gate.fence = rec.fence;
  if (auto delay = rec.delay()) {
    gate.open = false;
    gate.delay = std::move(delay);
    return gate;
  }
  if (!rec.covers) {
    // Committed before the grant it covers, so a replica that has the grant has this too.
    if (auto raised = cover_ttl(session, st, ttl); !raised) return std::unexpected(raised.error());
    gate.changed = true;
  }
  return gate;
}

}  // namespace dblock::sql::failover

namespace dblock::sql::failover {

DoctorCheck doctor_check(Session& session, const FailoverStatements& st) {
  auto rec = read(session, st);
  // Tables not made yet are the tables check's finding (it fails); here they are a state, said
  // as the privileges check says it. Any other error reading the record is a failed check.
  if (!rec && rec.error().kind == ErrorKind::schema_missing)
    return {"failover", true,
            "the dblock tables do not exist yet; the failover record is made with them (by the first run or "
            "`dblock init`)"};
  if (!rec) return {"failover", false, "the failover record could not be read: " + rec.error().message};
  if (!*rec) return {"failover", true, "no failover lock-delay on this database (it has no primary to fail over)"};
  const Record& r = **rec;
  const std::string ttl = format_duration(Millis(r.longest_ttl_ms));
  if (r.recorded.empty())
    return {"failover", true, "server incarnation " + r.current + "; no grant recorded yet, so no lock-delay to come"};
  if (auto delay = r.delay())
    return {"failover", true,
            "lock-delay in force after a " + delay->failover + ": nothing is granted until " +
                format_utc_ms(delay->until_ms) + " (in " + format_duration(Millis(delay->until_ms - delay->db_now_ms)) +
                "), the longest TTL recorded (" + ttl + ")"};
  if (!r.here)
    return {"failover", true,
            "the server is another incarnation (" + r.current + ") than the one recorded (" + r.recorded +
                "): a failover; the next acquisition starts a lock-delay of " + ttl + " (the longest TTL recorded)"};
  return {"failover", true,
          "server incarnation " + r.current + " recorded; no lock-delay in force; after a failover nothing is granted "
          "for " + ttl + " (the longest TTL recorded) and tokens jump past " + std::to_string(token_jump) +
              " (tokens now above " + std::to_string(r.fence) + ")"};
}

Result<void> cover_ttl(Session& session, const FailoverStatements& st, Millis ttl) {
  if (st.empty()) return {};
  auto raised = session.run(st.raise_ttl, Params(record_params()).set("ttl_ms", ms_value(ttl)));
  if (!raised) return std::unexpected(raised.error());
  return {};
}

Result<void> notice(Session& session, const FailoverStatements& st, Millis ttl) {
  auto rec = read(session, st, ttl);
  if (!rec) return std::unexpected(rec.error());
  // No record: nothing was granted here since the tables were made, so no grant can have been
  // lost; the next take makes it.
  if (!*rec || (*rec)->recorded.empty()) return {};
  Record r = **rec;
  if (!r.here) {
    auto moved = move(session, st, r, ttl);
    if (!moved) return std::unexpected(moved.error());
    r = *moved;
  }
  if (!r.covers) return cover_ttl(session, st, ttl);
  return {};
}

AcquireOutcome delayed(const Gate& gate) {
  AcquireOutcome out;
  out.state = AcquireOutcome::State::busy;
  out.lock_delay = gate.delay;
  return out;
}

Result<Gate> admit_once(Session& session, const FailoverStatements& st, std::optional<Admitted>& admitted, Millis ttl,
                        const ReadCheck& check) {
  if (admitted && admitted->ttl >= ttl) {
    Gate kept = admitted->gate;
    kept.changed = false;  // nothing was written this time
    return kept;
  }
  auto gate = admit(session, st, ttl, check);
  if (gate && gate->open) admitted = Admitted{*gate, ttl};
  return gate;
}

}  // namespace dblock::sql::failover

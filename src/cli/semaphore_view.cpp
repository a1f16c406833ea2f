#include "cli/semaphore_view.hpp"

#include "cli/context.hpp"
#include "core/semaphore.hpp"

namespace dblock::cli {

bool is_semaphore_header(const LockStatus& row) { return row.strategy == semaphore_marker; }

bool is_slot_row(const LockStatus& row) { return parse_slot_row(row.key).has_value(); }

std::vector<SlotStatus> read_slots(Backend& backend, const std::string& key) {
  const int slots = value_or_throw(backend.slot_count(key));
  if (slots == 0) return {};
  std::vector<std::string> names;
  for (int slot = 0; slot < slots; ++slot) names.push_back(slot_row_name(key, slot));
  auto rows = value_or_throw(backend.status(names));
  std::vector<SlotStatus> out;
  for (int slot = 0; slot < slots && static_cast<std::size_t>(slot) < rows.size(); ++slot) {
    LockStatus row = std::move(rows[static_cast<std::size_t>(slot)]);
    row.key = key;
    out.push_back({slot, std::move(row)});
  }
  return out;
}

LockStatus as_one_lock(const LockStatus& header, const std::vector<SlotStatus>& slots) {
  LockStatus one;
  one.key = header.key;
  one.token = header.token;
  one.strategy = header.strategy;
  one.db_now_ms = header.db_now_ms;
  one.state = LockStatus::State::free;
  const LockStatus* oldest = nullptr;
  for (const auto& slot : slots) {
    const LockStatus& s = slot.lock;
    if (s.state == LockStatus::State::held &&
        (!oldest || s.acquired_at_ms.value_or(0) < oldest->acquired_at_ms.value_or(0)))
      oldest = &s;
    if (s.last_started_at_ms > one.last_started_at_ms) one.last_started_at_ms = s.last_started_at_ms;
    if (s.last_finished_at_ms > one.last_finished_at_ms) {
      one.last_finished_at_ms = s.last_finished_at_ms;
      one.last_exit_code = s.last_exit_code;
    }
  }
  if (oldest) {
    one.state = LockStatus::State::held;
    one.owner = oldest->owner;
    one.host = oldest->host;
    one.pid = oldest->pid;
    one.strategy = oldest->strategy;
    one.acquired_at_ms = oldest->acquired_at_ms;
    one.renewed_at_ms = oldest->renewed_at_ms;
    one.expires_at_ms = oldest->expires_at_ms;
  }
  return one;
}

}  // namespace dblock::cli

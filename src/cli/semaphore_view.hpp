#pragma once
// How inspection shows a semaphore (--slots, core/semaphore.hpp): its header row records the
// slot count and the last token, and each slot is a lock row of its own. status lists the slots
// one by one; check and metrics see the key as one lock, held while any slot is.

#include <optional>
#include <string>
#include <vector>

#include "core/backend.hpp"

namespace dblock::cli {

/// One slot of a semaphore, its row's status under the semaphore's key.
struct SlotStatus {
  int slot = 0;
  LockStatus lock;
};

/// True for a semaphore's header row.
bool is_semaphore_header(const LockStatus& row);
/// True for a slot's own row (listed through its header instead).
bool is_slot_row(const LockStatus& row);

/// The slots of the semaphore `key`, in slot order; none when `key` is no semaphore.
std::vector<SlotStatus> read_slots(Backend& backend, const std::string& key);

/// The semaphore as one lock: held while any slot is (holder, since and expiry of the
/// longest-held slot), the header's token (the last issued), the newest last_* of any slot.
LockStatus as_one_lock(const LockStatus& header, const std::vector<SlotStatus>& slots);

}  // namespace dblock::cli

#pragma once
// Semaphores (`--slots N`): at most N holders of one key at a time, every strategy. Core builds
// them from plain locks: slot i of key K is an ordinary lock row named slot_row_name(K, i),
// taken with the strategy's own locker, so renewing, releasing, session watching and waking
// are the single-slot code. What a backend adds (docs/design.md, "Semaphores"): the
// row K becomes a header that records N and issues the fencing token of every slot, bumped in
// the same transaction that takes a slot, so tokens strictly increase per key across slots.

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "core/locker.hpp"

namespace dblock {

inline constexpr int max_slots = 1000;
/// Separates a key from its slot number in a slot row's name. Keys cannot hold control
/// characters (core/key.hpp), so no key of a user is ever a slot row.
inline constexpr char slot_separator = '\x1f';
/// The `strategy` a semaphore's header row shows; a plain lock on that key is refused.
inline constexpr std::string_view semaphore_marker = "semaphore";

/// "K\x1f3": the row of slot 3 of K.
std::string slot_row_name(std::string_view key, int slot);

struct SlotRow {
  std::string_view key;
  int slot = 0;
};
/// The key and slot of a slot row's name; nullopt for any other name.
std::optional<SlotRow> parse_slot_row(std::string_view name);
/// The key a row belongs to: the semaphore's for a slot row, else the name itself.
std::string_view key_of_row(std::string_view name);

/// Ok, or ErrorKind::usage: 1..max_slots, and the key short enough for its slot rows' names.
Result<void> validate_slots(std::string_view key, int slots);

/// ErrorKind::config: the key's header records `recorded` slots and this run asked for `asked`
/// (0: a plain lock, no --slots).
Error slots_mismatch(std::string_view key, int recorded, int asked);

/// ErrorKind::config: a plain lock (no --slots) asked for a key that is a semaphore.
Error plain_lock_on_semaphore(std::string_view key);

/// A semaphore of `slots` over `inner`, a plain locker of the strategy: each attempt tries the
/// slots in order and takes the first free one (AcquireOutcome::slot says which).
std::unique_ptr<Locker> make_semaphore_locker(std::unique_ptr<Locker> inner, int slots);

}  // namespace dblock

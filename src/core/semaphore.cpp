#include "core/semaphore.hpp"

#include <charconv>
#include <utility>

#include "core/key.hpp"

namespace dblock {

std::string slot_row_name(std::string_view key, int slot) {
  std::string name(key);
  name += slot_separator;
  name += std::to_string(slot);
  return name;
}

std::optional<SlotRow> parse_slot_row(std::string_view name) {
  const auto at = name.rfind(slot_separator);
  if (at == std::string_view::npos || at == 0 || at + 1 == name.size()) return std::nullopt;
  int slot = 0;
  const char* first = name.data() + at + 1;
  const char* last = name.data() + name.size();
  auto [end, ec] = std::from_chars(first, last, slot);
  if (ec != std::errc() || end != last || slot < 0) return std::nullopt;
  return SlotRow{name.substr(0, at), slot};
}

std::string_view key_of_row(std::string_view name) {
  auto row = parse_slot_row(name);
  return row ? row->key : name;
}

Result<void> validate_slots(std::string_view key, int slots) {
  if (slots < 1 || slots > max_slots)
    return fail(ErrorKind::usage,
                "--slots: " + std::to_string(slots) + " is not a slot count from 1 to " + std::to_string(max_slots));
  const std::size_t longest = slot_row_name(key, slots - 1).size();
  if (longest > max_key_bytes)
    return fail(ErrorKind::usage, "invalid key for --slots: " + std::to_string(key.size()) + " bytes long, at most " +
                                      std::to_string(max_key_bytes - (longest - key.size())) +
                                      " bytes with --slots " + std::to_string(slots) +
                                      " (each slot's row adds its number to the key)");
  return {};
}

Error slots_mismatch(std::string_view key, int recorded, int asked) {
  std::string text = "'" + std::string(key) + "' is a semaphore of " + std::to_string(recorded) +
                     " slots, recorded by its holders; ";
  text += asked > 0 ? "this one asked for --slots " + std::to_string(asked) : std::string("this one gave no --slots");
  text += " (every holder must give --slots " + std::to_string(recorded) +
          "; the count changes only once no slot is held)";
  return Error{ErrorKind::config, std::move(text)};
}

Error plain_lock_on_semaphore(std::string_view key) {
  return Error{ErrorKind::config, "'" + std::string(key) +
                                      "' is a semaphore: its holders give --slots, and so must this one "
                                      "(`dblock status " + std::string(key) + "` shows how many slots)"};
}

namespace {

class SemaphoreLocker final : public Locker {
 public:
  SemaphoreLocker(std::unique_ptr<Locker> inner, int slots) : inner_(std::move(inner)), slots_(slots) {}

  // Every slot once, lowest first, none blocking: a waiter takes whichever frees first. A
  // header that another slot count or a plain holder owns answers the same for every slot, so
  // the first answer settles it. Then, when core allows a wait, one slot is tried with it, a
  // different one each attempt. A backend without a wake-up descriptor (MariaDB's wake names
  // and lock waits, PostgreSQL's session lock waits) blocks on that slot for the slice: its
  // release wakes this waiter at once, any other is seen by the next attempt, at most one slice
  // later. One with a descriptor (SQLite, PostgreSQL lease) hears the release of any slot
  // through it: the wait only lets it start listening, which a PostgreSQL lease waiter does
  // once it is at the head of the semaphore's queue (it waits for that place meanwhile).
  Result<AcquireOutcome> try_acquire(const LockRequest& req, Millis wait) override {
    std::optional<LockStatus> first_holder;
    for (int slot = 0; slot < slots_; ++slot) {
      auto out = attempt(req, slot, Millis(0), first_holder);
      if (!out || out->state != AcquireOutcome::State::busy || settled_) return out;
    }
    if (wait > Millis(0)) {
      const int slot = next_wait_slot_;
      next_wait_slot_ = (next_wait_slot_ + 1) % slots_;
      auto out = attempt(req, slot, wait, first_holder);
      if (!out || out->state != AcquireOutcome::State::busy || settled_) return out;
    }
    AcquireOutcome busy;
    busy.state = AcquireOutcome::State::busy;
    if (first_holder) {
      busy.holder = std::move(first_holder);
      busy.holder->key = req.key;
    }
    return busy;
  }

  Result<void> renew(Millis ttl) override { return inner_->renew(ttl); }
  Result<void> release(const ReleaseRequest& req) override { return inner_->release(req); }
  int session_fd() const override { return inner_->session_fd(); }
  int wakeup_fd() const override { return inner_->wakeup_fd(); }
  void consume_wakeup() override { inner_->consume_wakeup(); }

 private:
  // One slot's attempt. settled_: the answer holds for every slot (taken, refused by the
  // header, not due), so no other slot is tried.
  Result<AcquireOutcome> attempt(const LockRequest& req, int slot, Millis wait, std::optional<LockStatus>& first_holder) {
    settled_ = true;
    LockRequest one = req;
    one.key = slot_row_name(req.key, slot);
    one.semaphore = req.key;
    one.slots = slots_;
    auto out = inner_->try_acquire(one, wait);
    if (!out) return out;
    if (out->recorded_slots) return std::unexpected(slots_mismatch(req.key, *out->recorded_slots, slots_));
    if (out->state == AcquireOutcome::State::acquired) {
      out->slot = slot;
      return out;
    }
    const bool plain_holder = out->holder && out->holder->key == req.key;
    if (out->holder && !first_holder) first_holder = out->holder;
    settled_ = plain_holder || out->state == AcquireOutcome::State::not_due;
    return out;
  }

  std::unique_ptr<Locker> inner_;
  int slots_;
  int next_wait_slot_ = 0;
  bool settled_ = false;
};

}  // namespace

std::unique_ptr<Locker> make_semaphore_locker(std::unique_ptr<Locker> inner, int slots) {
  return std::make_unique<SemaphoreLocker>(std::move(inner), slots);
}

}  // namespace dblock

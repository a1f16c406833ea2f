#pragma once
// The SQLite backend's wake primitive: waiters of one host sleep on a word of <database>-wake
// (futex(2)) instead of polling the database.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/error.hpp"
#include "core/sql/waiters.hpp"

namespace dblock::files {

/// The wake primitive (core/sql/waiters.hpp) of the processes of one host that share a
/// database file: a word per key (1,024 words, a key's hash picks one) in <database>-wake,
/// mapped by the processes that wait or release. A release increments its key's word and wakes
/// one process sleeping on it (futex(2)), not every waiter of every key. A waiter's place is a
/// thread of its own that watches its key's word, which makes fd() readable when the word
/// changes: woken by a release, or at its own second's timeout when another waiter was woken.
/// Without the file (a directory the user may not write, something else in its place) there is
/// no place to take, and the waiter falls back to core's backoff.
class WakeWords final : public sql::Wake {
 public:
  explicit WakeWords(const std::string& database) : database_(database), path_(database + "-wake") {}
  WakeWords(const WakeWords&) = delete;
  WakeWords& operator=(const WakeWords&) = delete;
  ~WakeWords() override { leave({}); }
  void post(const std::string& key) override;
  void hold(const std::string& key) override { leave(key); }
  Result<bool> join(const std::string& key, Millis left) override;
  /// Never blocks and leaves a wake where it is: core sleeps on fd(), which a wake that came
  /// meanwhile keeps readable, so the waiter retries at once and says a release was announced.
  Result<bool> wait(const std::string&, Millis) override { return false; }
  /// The watch ends; its thread is left to end at its next wake-up.
  void leave(const std::string&) override;
  int fd() const override;
  bool consume() override;

  struct Words;  // the file's mapping
  struct Watch;  // a waiter's thread and what it shares

 private:
  std::uint32_t* word(const std::string& key, bool create);

  std::string database_, path_;
  std::shared_ptr<Words> words_;
  bool failed_ = false;  // no file to map: core's backoff
  std::shared_ptr<Watch> watch_;
};

/// The word of <database>-wake that `key`'s waiters sleep on (keys may share one).
std::size_t wake_word_of(const std::string& key);

}  // namespace dblock::files

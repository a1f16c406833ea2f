#pragma once
// The SQLite backend's release signal: waiters of one host sleep on a word of <database>-wake
// (futex(2)) instead of polling the database.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/error.hpp"
#include "core/sql/sql_session.hpp"

namespace dblock::files {

/// A release signal (sql_session.hpp) for the processes of one host that share a database
/// file: a word per key (1,024 words, a key's hash picks one) in <database>-wake, mapped by the
/// processes that wait or release. A release increments its key's word and wakes one process
/// sleeping on it (futex(2)), not every waiter of every key. A waiter watches its key's word on a
/// thread of its own, which makes fd() readable when the word changes: woken by a release, or
/// at its own second's timeout when another waiter was woken. Without the file (a directory the
/// user may not write, something else in its place) the waiter falls back to core's backoff.
class WakeWords final : public sql::ReleaseSignal {
 public:
  explicit WakeWords(const std::string& database) : database_(database), path_(database + "-wake") {}
  WakeWords(const WakeWords&) = delete;
  WakeWords& operator=(const WakeWords&) = delete;
  ~WakeWords() override { stop(); }
  void released(const std::string& key) override;
  Result<bool> busy(const std::string& key, Millis left) override;
  /// The watch ends once the key is taken, or with this object; not when an attempt stops
  /// waiting (stop_waiting), which core follows with a sleep on fd().
  void holding(const std::string&) override { stop(); }
  int fd() const override;
  void consume() override;

  struct Words;  // the file's mapping
  struct Watch;  // a waiter's thread and what it shares

 private:
  std::uint32_t* word(const std::string& key, bool create);
  void stop();

  std::string database_, path_;
  std::shared_ptr<Words> words_;
  bool failed_ = false;  // no file to map: core's backoff
  std::string key_;      // the key watch_ watches
  std::shared_ptr<Watch> watch_;
};

/// The word of <database>-wake that `key`'s waiters sleep on (keys may share one).
std::size_t wake_word_of(const std::string& key);

}  // namespace dblock::files

#include "backends/sqlite/sqlite_wake.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <ctime>
#include <thread>

#include "backends/sqlite/sqlite_file.hpp"
#include "core/sql/identifiers.hpp"

namespace dblock::files {

namespace {

constexpr std::size_t wake_words = 1024;
constexpr std::size_t wake_file_size = wake_words * sizeof(std::uint32_t);

long futex(std::uint32_t* word, int op, std::uint32_t value, const timespec* timeout) {
  return ::syscall(SYS_futex, word, op, value, timeout, nullptr, 0);
}

}  // namespace

struct WakeWords::Words {
  void* map = nullptr;
  ~Words() {
    if (map) ::munmap(map, wake_file_size);
  }
};

struct WakeWords::Watch {
  std::shared_ptr<Words> words;  // mapped while the thread waits on it
  std::uint32_t* word = nullptr;
  int event_fd = -1;
  std::atomic<bool> stopping{false};
  ~Watch() {
    if (event_fd >= 0) ::close(event_fd);
  }
};

namespace {

// A waiter's thread: sleeps on the word while it holds `seen`, and tells the waiter (its event
// fd) when a release woke it, or when the word had changed before it slept. A change seen only
// at its timeout woke another waiter, so it is not told: one waiter per release. Stopped, the
// thread is left to end at its next wake-up (at most a second), and hands a release that woke
// it meanwhile on to another waiter.
void watch_word(const std::shared_ptr<WakeWords::Watch>& w, std::uint32_t seen) {
  const timespec second{1, 0};
  for (;;) {
    const bool timed_out = futex(w->word, FUTEX_WAIT, seen, &second) != 0 && errno == ETIMEDOUT;
    const std::uint32_t now = std::atomic_ref(*w->word).load();
    if (w->stopping.load()) {
      if (now != seen && !timed_out) futex(w->word, FUTEX_WAKE, 1, nullptr);
      return;
    }
    if (now != seen && !timed_out) {
      const std::uint64_t one = 1;
      [[maybe_unused]] const auto written = ::write(w->event_fd, &one, sizeof one);  // a full counter is readable anyway
    }
    seen = now;
  }
}

}  // namespace

// The key's word, or null. Only a waiter makes the file (`create`): a release with no file has
// no waiter to wake. The file gets the database's mode, as SQLite gives its -wal and -shm; one
// that is not a regular file of this size is left alone (never truncated: not ours to change).
std::uint32_t* WakeWords::word(const std::string& key, bool create) {
  if (!words_ && !failed_) {
    struct stat db{};
    const mode_t mode = ::stat(database_.c_str(), &db) == 0 ? (db.st_mode & 0666) : 0600;
    const int fd = ::open(path_.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), mode);
    if (fd < 0) {
      failed_ = create;  // without create: a waiter may make it later
      return nullptr;
    }
    struct stat st{};
    // What was opened, by descriptor: another user's file (or a second name of one) is left alone.
    bool ok = ::fstat(fd, &st) == 0 && check_entry(path_, st, {database_, "database", {}}).has_value();
    if (ok && st.st_size == 0) {
      // root's is handed to the database's owner, as SQLite does with its own files
      if (::geteuid() == 0 && db.st_uid != 0) (void)::fchown(fd, db.st_uid, db.st_gid);
      ok = ::fchmod(fd, mode) == 0;
    } else if (ok) {
      ok = st.st_size == static_cast<off_t>(wake_file_size);
    }
    // Blocks allocated now, not sizes promised: a page of a sparse file that the file system
    // cannot back (full disk) raises SIGBUS when the mapping touches it. So the file is
    // grown with posix_fallocate, and one made sparse by an older dblock is filled in; on a
    // full disk that fails here, and the waiter polls instead.
    ok = ok && ::posix_fallocate(fd, 0, static_cast<off_t>(wake_file_size)) == 0;
    void* map = ok ? ::mmap(nullptr, wake_file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    ::close(fd);
    if (map == MAP_FAILED) {
      failed_ = true;
      return nullptr;
    }
    words_ = std::make_shared<Words>();
    words_->map = map;
  }
  if (!words_) return nullptr;
  return static_cast<std::uint32_t*>(words_->map) + wake_word_of(key);
}

std::size_t wake_word_of(const std::string& key) {
  return static_cast<std::uint64_t>(key_hash("", key)) % wake_words;
}

void WakeWords::post(const std::string& key) {
  std::uint32_t* w = word(key, false);
  if (!w) return;
  std::atomic_ref(*w).fetch_add(1);
  futex(w, FUTEX_WAKE, 1, nullptr);
}

Result<bool> WakeWords::join(const std::string& key, Millis) {
  leave(key);
  std::uint32_t* w = word(key, true);
  if (!w) return false;
  auto watch = std::make_shared<Watch>();
  watch->words = words_;
  watch->word = w;
  watch->event_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (watch->event_fd < 0) return false;
  const std::uint32_t seen = std::atomic_ref(*w).load();
  // The thread takes no signal: they are core's (signalfd), whatever this thread's mask was.
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    std::thread(watch_word, watch, seen).detach();
  } catch (const std::system_error&) {
    watch.reset();
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (!watch) return false;
  watch_ = std::move(watch);
  return true;
}

int WakeWords::fd() const { return watch_ ? watch_->event_fd : -1; }

bool WakeWords::consume() {
  std::uint64_t n;
  bool woken = false;
  while (watch_ && ::read(watch_->event_fd, &n, sizeof n) > 0) woken = true;
  return woken;
}

void WakeWords::leave(const std::string&) {
  if (watch_) watch_->stopping = true;
  watch_.reset();
}

}  // namespace dblock::files

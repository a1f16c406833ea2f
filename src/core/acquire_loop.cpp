#include "core/acquire_loop.hpp"

#include <poll.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <random>

#include "core/clock.hpp"
#include "core/duration.hpp"
#include "core/log.hpp"
#include "core/semaphore.hpp"

namespace dblock {
namespace {

using namespace std::chrono_literals;

constexpr Millis first_backoff = 50ms;
constexpr Millis max_backoff = 1000ms;
// How long a session strategy's server may block one attempt: short, so a signal or the
// deadline is noticed within half a second even while the server holds the call.
constexpr Millis server_slice = 500ms;
// How often a plain lock's waiter whose server waits end with their slice asks who holds the key
// (LockRequest::describe_holder): with -v, once a second, as its lines; else now and then, for
// the last holder named when the wait ends and a semaphore header appearing meanwhile.
constexpr Millis describe_every = 5000ms;
constexpr Millis describe_every_verbose = 1000ms;

std::mt19937_64& rng() {
  static std::mt19937_64 r{std::random_device{}()};
  return r;
}

// Jitter spreads the retries of many hosts that started on the same cron minute.
Millis jittered(Millis base) {
  std::uniform_int_distribution<std::int64_t> dist(base.count() / 2, base.count());
  return Millis(dist(rng()));
}

// Full jitter, anywhere in [0, base]: after a storm's first wave was turned away, its hosts
// would come back together within half a backoff and be turned away again.
Millis fully_jittered(Millis base) {
  std::uniform_int_distribution<std::int64_t> dist(0, base.count());
  return Millis(dist(rng()));
}

// After a connection error: the first retry comes soon (a dropped connection is often back at
// once), later ones back off to max_backoff, so a restarting server sees one try a second.
constexpr Millis first_retry_backoff = 100ms;

// Where attempts go: the caller's own locker, or one opened here and opened again after a
// connection error, so a dead connection never serves the next attempt.
class LockerSlot {
 public:
  explicit LockerSlot(Locker& fixed) : fixed_(&fixed) {}
  explicit LockerSlot(const OpenLocker& open) : open_(&open) {}

  /// The locker for the next attempt, opened first when there is none.
  Result<Locker*> get() {
    if (fixed_) return fixed_;
    if (!owned_) {
      auto made = (*open_)();
      if (!made) return std::unexpected(made.error());
      if (!*made) return fail(ErrorKind::internal, "opening the database gave no locker");
      owned_ = std::move(*made);
    }
    return owned_.get();
  }
  /// Forgets an opened locker (and with it its connections); a caller's locker stays.
  void drop() { owned_.reset(); }
  std::unique_ptr<Locker> take() { return std::move(owned_); }

  int wakeup_fd() const {
    const Locker* l = fixed_ ? fixed_ : owned_.get();
    return l ? l->wakeup_fd() : -1;
  }
  void consume_wakeup() {
    if (Locker* l = fixed_ ? fixed_ : owned_.get()) l->consume_wakeup();
  }

 private:
  Locker* fixed_ = nullptr;
  const OpenLocker* open_ = nullptr;
  std::unique_ptr<Locker> owned_;
};

enum class Woken { timeout, signal, wakeup };

// Sleeps until `until` (CLOCK_BOOTTIME) unless a watched signal or the backend's wake-up
// descriptor interrupts; a forwarded signal is stored in *sig.
Woken sleep_until(Millis until, SignalWatch& signals, LockerSlot& slot, int* sig) {
  for (;;) {
    Millis now = boottime_now();
    Millis left = until > now ? until - now : 0ms;
    pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {slot.wakeup_fd(), POLLIN, 0}};
    int timeout = static_cast<int>(std::min<std::int64_t>(left.count(), 60'000));
    int n = ::poll(fds, 2, timeout);
    if (n < 0 && errno != EINTR) return Woken::timeout;
    if (n > 0 && (fds[0].revents & POLLIN)) {
      while (auto s = signals.next()) {
        if (is_forwarded_signal(*s)) {
          *sig = *s;
          return Woken::signal;
        }
      }
    }
    if (n > 0 && (fds[1].revents & POLLIN)) {
      slot.consume_wakeup();
      return Woken::wakeup;
    }
    if (boottime_now() >= until) return Woken::timeout;
  }
}

std::string held_line(const std::string& key, const AcquireOutcome& out) {
  if (out.lock_delay) return "'" + key + "' is " + describe_lock_delay(*out.lock_delay);
  if (out.holder) return "'" + key + "' is " + describe_holder(*out.holder);
  return "'" + key + "' is held by someone else";
}

}  // namespace

std::string format_utc_ms(std::int64_t ms) {
  // Calendar arithmetic, not gmtime_r: glibc's reads /etc/localtime first (tzset), even for
  // UTC, and every run formats its lease's end (docs/performance.md, SQLite).
  using namespace std::chrono;
  const sys_time<milliseconds> at{milliseconds(ms)};
  const sys_days day = floor<days>(at);
  const year_month_day date{day};
  const hh_mm_ss<milliseconds> time{at - day};
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", static_cast<int>(date.year()),
                static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                static_cast<int>(time.hours().count()), static_cast<int>(time.minutes().count()),
                static_cast<int>(time.seconds().count()), static_cast<int>(time.subseconds().count()));
  return buf;
}

std::string describe_not_due(const AcquireOutcome& out) {
  std::string s = "it ran less than --min-interval ago";
  if (out.holder && out.holder->last_started_at_ms) {
    s += " (last started " + format_utc_ms(*out.holder->last_started_at_ms);
    if (!out.holder->host.empty()) s += " on " + out.holder->host;
    s += ")";
  }
  if (out.due_in) s += "; due in " + format_duration(*out.due_in);
  return s;
}

std::string describe_lock_delay(const LockDelay& delay) {
  return "blocked by the failover lock-delay (" + delay.failover + ") until " + format_utc_ms(delay.until_ms) +
         " (in " + format_duration(Millis(std::max<std::int64_t>(delay.until_ms - delay.db_now_ms, 0))) + ")";
}

std::string describe_holder(const LockStatus& h) {
  std::string s = "held by " + (h.owner.empty() ? std::string("?") : h.owner);
  if (!h.host.empty()) s += " on " + h.host;
  s += " (pid " + std::to_string(h.pid) + ", token " + std::to_string(h.token);
  if (!h.strategy.empty()) s += ", " + h.strategy;
  s += ")";
  if (h.acquired_at_ms) s += " since " + format_utc_ms(*h.acquired_at_ms);
  if (h.expires_at_ms) {
    s += ", expires " + format_utc_ms(*h.expires_at_ms);
    if (h.db_now_ms) s += " (in " + format_duration(Millis(*h.expires_at_ms - h.db_now_ms)) + ")";
  }
  return s;
}

namespace {

// "02:00:03": the local time of day of `ms` since the epoch, for a person at a terminal.
std::string local_time_of_day(std::int64_t ms) {
  time_t secs = static_cast<time_t>(ms / 1000);
  tm t{};
  localtime_r(&secs, &t);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%02d:%02d:%02d", t.tm_hour, t.tm_min, t.tm_sec);
  return buf;
}

}  // namespace

std::string lock_delay_summary(const LockDelay& delay) {
  // Whole seconds, as holder_summary's expiry.
  const Millis left(std::max<std::int64_t>(delay.until_ms - delay.db_now_ms, 0));
  return "the failover lock-delay (" + delay.failover + ") until " + local_time_of_day(delay.until_ms) + " (in " +
         format_duration(std::chrono::round<std::chrono::seconds>(left)) + ")";
}

std::string holder_summary(const LockStatus& h) {
  std::string s = !h.owner.empty() ? h.owner : h.host + ":" + std::to_string(h.pid);
  if (h.acquired_at_ms) s += " since " + local_time_of_day(*h.acquired_at_ms);
  std::string details = h.strategy;
  if (h.expires_at_ms && h.db_now_ms) {
    if (!details.empty()) details += ", ";
    // Whole seconds: the line is for a person.
    const Millis left(std::max<std::int64_t>(*h.expires_at_ms - h.db_now_ms, 0));
    details += "expires in " + format_duration(std::chrono::round<std::chrono::seconds>(left));
  }
  if (!details.empty()) s += " (" + details + ")";
  return s;
}

namespace {

// The feedback line for a person at a terminal when a wait ends without the lock.
void progress_gave_up(const std::string& key, const WaitResult& r, const std::string& why) {
  std::string line = "gave up waiting for '" + key + "' after " + format_duration(r.waited);
  log::progress(line + ": " + why);
}

Result<WaitResult> wait_loop(LockerSlot& slot, const LockRequest& request, std::optional<Millis> wait,
                             SignalWatch& signals, Millis overload_retry) {
  const Millis start = boottime_now();
  const bool forever = wait && *wait == Millis::max();
  const Millis deadline = !wait ? start : forever ? Millis::max() : start + std::max(*wait, 0ms);
  auto remaining = [&](Millis now) { return forever ? Millis::max() : std::max(deadline - now, 0ms); };
  // Overloaded connection errors are retried at least this long, with or without a wait.
  const Millis overload_deadline = start + std::max(overload_retry, 0ms);
  const std::string& key = request.key;
  Millis backoff = first_backoff;
  Millis retry_backoff = first_retry_backoff;
  int failures = 0;             // connection errors since the database last answered
  bool turned_away = false;     // one of them was an overload (Error::overloaded)
  std::string last_logged;      // the connection error -v last told about
  std::string last_refusal;     // the server's busy answer -v last told about
  // -v "retrying" lines: at most one a second, and one at every change of the holder.
  std::string retry_state;
  Millis retry_logged_at{0};
  bool told_delay = false;      // the terminal was told of the failover lock-delay
  bool server_waited = false;   // the last attempt's server blocked for its slice
  Millis described_at{0};       // the last attempt that said who holds the key
  const Millis describe_gap = log::level() == log::Level::verbose ? describe_every_verbose : describe_every;
  LockRequest asked = request;
  WaitResult result;

  for (;;) {
    // A signal that came during the previous attempt's server call ends the wait here.
    while (auto s = signals.next()) {
      if (is_forwarded_signal(*s)) {
        log::verbose("signal " + std::to_string(*s) + " while waiting for '" + key + "': giving up");
        result.signal = *s;
        if (result.told_waiting) progress_gave_up(key, result, "signal " + std::to_string(*s));
        return result;
      }
    }

    auto locker = slot.get();
    const Millis sent = boottime_now();
    const Millis slice = wait ? std::min(server_slice, remaining(sent)) : 0ms;
    // Who holds it is asked after a refusal that came at once (a backoff follows anyway), and
    // otherwise only now and then: between two slices of a wait it would cost a round trip. A
    // semaphore's attempt always asks: a plain holder of its key settles it (semaphore.cpp).
    asked.describe_holder = request.slots > 0 || result.attempts == 0 || !server_waited || sent - described_at >= describe_gap;
    if (asked.describe_holder) described_at = sent;
    server_waited = false;
    Result<AcquireOutcome> attempt = locker ? (*locker)->try_acquire(asked, slice)
                                            : Result<AcquireOutcome>(std::unexpected(locker.error()));
    const Millis replied = boottime_now();
    result.sent_at = sent;
    result.replied_at = replied;
    result.waited = replied - start;

    if (!attempt && attempt.error().kind == ErrorKind::connection) {
      // The database may be restarting or out of connections: within the wait that is one
      // more reason to come back later, from a fresh connection.
      slot.drop();
      ++failures;
      const Error& error = attempt.error();
      // Once the server has turned this run away as overloaded, it is up: a connect that then
      // times out (its listen queue full, SYNs dropped) is the same storm.
      turned_away = turned_away || error.overloaded;
      const bool storm = turned_away && replied < overload_deadline;
      const bool waiting = wait && (forever || replied < deadline);
      if (!storm && !waiting) {
        // A storm that outlasted --overload-retry: the server is up and full of other
        // contenders for the same minute, so without a wait this is a skip, as a held lock is.
        if (!wait && turned_away && overload_retry > 0ms) {
          result.turned_away = "the database turned it away for " + format_duration(replied - start) + " (" +
                               std::to_string(failures) + " attempts, --overload-retry): " + error.message;
          log::verbose("'" + key + "': " + result.turned_away);
          return result;
        }
        if (failures == 1) return std::unexpected(error);
        return fail(ErrorKind::connection, "could not reach the database for '" + key + "' within the wait of " +
                                               format_duration(*wait) + " (" + std::to_string(failures) +
                                               " attempts); the last error: " + error.message);
      }
      Millis wake_at = replied + (turned_away ? fully_jittered(retry_backoff) : jittered(retry_backoff));
      retry_backoff = std::min(retry_backoff * 2, max_backoff);
      const Millis give_up_at = waiting ? (forever ? Millis::max() : std::max(deadline, overload_deadline))
                                        : overload_deadline;
      wake_at = std::min(wake_at, give_up_at);
      if (error.message != last_logged) {
        log::verbose(error.message + (waiting ? "; retrying until the wait ends" : "; the server is overloaded: retrying") +
                     (give_up_at == Millis::max() ? std::string()
                                                   : " (" + format_duration(give_up_at - replied) + " left)"));
        last_logged = error.message;
      }
      int sig = 0;
      if (sleep_until(wake_at, signals, slot, &sig) == Woken::signal) {
        log::verbose("signal " + std::to_string(sig) + " while waiting for '" + key + "': giving up");
        result.signal = sig;
        if (result.told_waiting) progress_gave_up(key, result, "signal " + std::to_string(sig));
        return result;
      }
      continue;
    }
    if (failures > 0) {
      log::verbose("the database answers again, after " + std::to_string(failures) + " failed attempt" +
                   (failures == 1 ? "" : "s"));
      failures = 0;
      retry_backoff = first_retry_backoff;
      last_logged.clear();
    }

    if (!attempt) {
      // A lock-wait timeout from the server is just "held by someone" for a waiter.
      if (!held_elsewhere(attempt.error().kind)) return std::unexpected(attempt.error());
      // The server's own words (a deadlock or a certification conflict, 1213; a lock wait's
      // timeout) say why a take that looks held was refused: -v tells them once, not at every
      // slice that ends in the same one.
      if (log::level() == log::Level::verbose && attempt.error().message != last_refusal) {
        last_refusal = attempt.error().message;
        log::verbose("'" + key + "': the database refused the take: " + last_refusal + " (taken as held elsewhere)");
      }
      result.outcome = AcquireOutcome{};
    } else {
      result.outcome = *attempt;
    }
    const AcquireOutcome& out = result.outcome;
    ++result.attempts;
    if (out.holder) result.last_holder = out.holder;
    // A semaphore's header looks held to a plain lock: waiting would never end (--slots N).
    if (out.state != AcquireOutcome::State::acquired && request.slots == 0 && out.holder &&
        out.holder->strategy == semaphore_marker)
      return std::unexpected(plain_lock_on_semaphore(key));

    if (out.state == AcquireOutcome::State::acquired) {
      std::string line = "acquired '" + key + "' with token " + std::to_string(out.token);
      if (out.expires_at_ms) line += ", lease until " + format_utc_ms(*out.expires_at_ms);
      log::verbose(line);
      return result;
    }

    Millis wake_at;
    if (out.state == AcquireOutcome::State::not_due) {
      const std::string why = "'" + key + "': " + describe_not_due(out);
      if (!wait) {
        log::verbose(why + ": skipping");
        return result;
      }
      if (!out.due_in || (!forever && replied + *out.due_in > deadline)) {
        log::verbose(why + ", beyond the wait: giving up");
        if (result.told_waiting) progress_gave_up(key, result, "not due before the wait ends");
        return result;
      }
      log::verbose(why + ": sleeping until due");
      if (!result.told_waiting) {
        log::progress("waiting for '" + key + "': " + describe_not_due(out));
        result.told_waiting = true;
      }
      // A little past due, so the server's clock has surely moved beyond it.
      wake_at = replied + *out.due_in + 20ms;
      if (!forever) wake_at = std::min(wake_at, deadline);
    } else {
      if (!wait) {
        log::verbose(held_line(key, out) + "; not waiting");
        return result;
      }
      // An attempt not asked who holds it (describe_holder) keeps the last one named.
      const std::optional<LockStatus>& named = asked.describe_holder ? out.holder : result.last_holder;
      if (!forever && replied >= deadline) {
        log::verbose(held_line(key, out) + "; the wait of " + format_duration(*wait) + " is over: giving up");
        if (result.told_waiting)
          progress_gave_up(key, result,
                           out.lock_delay ? "still blocked by " + lock_delay_summary(*out.lock_delay)
                           : named        ? "still held by " + named->owner
                                          : "still held");
        return result;
      }
      if (!result.told_waiting) {
        log::progress("waiting for '" + key + "'" +
                      (out.lock_delay ? " for " + lock_delay_summary(*out.lock_delay)
                       : out.holder   ? ", held by " + holder_summary(*out.holder)
                                      : std::string()));
        result.told_waiting = true;
        told_delay = out.lock_delay.has_value();
      } else if (out.lock_delay && !told_delay) {
        // A failover during the wait: the lock-delay may outlast the holder by a whole TTL, so
        // a person at the terminal is told once why nothing happens, and until when.
        log::progress("still waiting for '" + key + "', now for " + lock_delay_summary(*out.lock_delay));
        told_delay = true;
      }
      // When the server already blocked for the slice, retry at once; otherwise back off.
      server_waited = slice > 0ms && replied - sent >= slice / 2;
      const Millis pause = server_waited ? 0ms : jittered(backoff);
      if (!server_waited) backoff = std::min(backoff * 2, max_backoff);
      wake_at = replied + pause;
      if (!forever) wake_at = std::min(wake_at, deadline);
      // A server that blocks each attempt for the slice would otherwise log two lines a second.
      std::string state = out.lock_delay ? "lock-delay"
                          : named        ? named->owner + "/" + std::to_string(named->token)
                                         : "?";
      if (state != retry_state || replied - retry_logged_at >= 1000ms) {
        log::verbose(held_line(key, out) + "; retrying in " + format_duration(wake_at - replied) +
                     (forever ? std::string() : " (" + format_duration(remaining(replied)) + " left)"));
        retry_state = std::move(state);
        retry_logged_at = replied;
      }
    }

    int sig = 0;
    switch (sleep_until(wake_at, signals, slot, &sig)) {
      case Woken::signal:
        log::verbose("signal " + std::to_string(sig) + " while waiting for '" + key + "': giving up");
        result.signal = sig;
        if (result.told_waiting) progress_gave_up(key, result, "signal " + std::to_string(sig));
        return result;
      case Woken::wakeup:
        log::verbose("a release was announced: retrying '" + key + "' now");
        backoff = first_backoff;
        break;
      case Woken::timeout:
        break;
    }
  }
}

}  // namespace

Millis overload_retry_for(Millis requested, Millis ttl) { return std::clamp(requested, 0ms, std::max(ttl / 3, 0ms)); }

Result<Waited> acquire_with_wait(const OpenLocker& open, const LockRequest& request, std::optional<Millis> wait,
                                 SignalWatch& signals, Millis overload_retry) {
  LockerSlot slot(open);
  auto result = wait_loop(slot, request, wait, signals, overload_retry);
  if (!result) return std::unexpected(result.error());
  return Waited{*result, slot.take()};
}

Result<WaitResult> acquire_with_wait(Locker& locker, const LockRequest& request, std::optional<Millis> wait) {
  SignalWatch signals;
  return acquire_with_wait(locker, request, wait, signals, 0ms);
}

Result<WaitResult> acquire_with_wait(Locker& locker, const LockRequest& request, std::optional<Millis> wait,
                                     SignalWatch& signals, Millis overload_retry) {
  LockerSlot slot(locker);
  return wait_loop(slot, request, wait, signals, overload_retry);
}

}  // namespace dblock

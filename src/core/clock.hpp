#pragma once
// Local deadlines use CLOCK_BOOTTIME: monotonic, and it keeps counting while the host is
// suspended, so a lease deadline measured here can only come early, never late.

#include <time.h>

#include <fstream>
#include <optional>
#include <string>

#include "core/lock_types.hpp"

namespace dblock {

/// Milliseconds on CLOCK_BOOTTIME.
inline Millis boottime_now() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return Millis(static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000);
}

/// This boot's id (/proc/sys/kernel/random/boot_id): CLOCK_BOOTTIME readings compare only
/// within one boot. nullopt where the kernel does not say (no /proc).
inline const std::optional<std::string>& boot_id() {
  static const std::optional<std::string> id = []() -> std::optional<std::string> {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string line;
    if (!std::getline(in, line) || line.empty()) return std::nullopt;
    return line;
  }();
  return id;
}

/// Milliseconds since the epoch on this host's wall clock (only for doctor's clock check).
inline std::int64_t wall_now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

}  // namespace dblock

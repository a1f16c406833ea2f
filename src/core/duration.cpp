#include "core/duration.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

namespace dblock {
namespace {

// Bounded so that adding a duration to a timestamp can never overflow: 100 years.
constexpr double max_ms = 100.0 * 365 * 24 * 3600 * 1000;

Result<Millis> usage_error(std::string_view text, std::string_view why) {
  return fail(ErrorKind::usage, "invalid duration '" + std::string(text) + "': " + std::string(why) +
                                    " (use e.g. 250ms, 30s, 5m, 10min, 1h30m, \"1h 30min\", 2d or a number of seconds)");
}

std::optional<double> parse_number(std::string_view digits) {
  if (digits.empty() || digits.front() == '.' || digits.back() == '.') return std::nullopt;
  double value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value,
                                   std::chars_format::fixed);
  if (ec != std::errc{} || end != digits.data() + digits.size() || !std::isfinite(value))
    return std::nullopt;
  return value;
}

// dblock's short units plus the spellings of systemd.time(7) time spans, so a value copied from
// a unit file (RuntimeMaxSec=1h 30min) means the same here. Not "M" (month): next to "m"
// (minute) that is a typo waiting to happen.
std::optional<double> unit_ms(std::string_view unit) {
  struct Unit {
    std::string_view name;
    double ms;
  };
  static constexpr double day = 86'400'000.0;
  static constexpr Unit units[] = {
      {"us", 0.001},     {"usec", 0.001},  {"\u00b5s", 0.001},  {"ms", 1.0},        {"msec", 1.0},
      {"s", 1000.0},     {"sec", 1000.0},  {"second", 1000.0}, {"seconds", 1000.0}, {"m", 60'000.0},
      {"min", 60'000.0}, {"minute", 60'000.0}, {"minutes", 60'000.0}, {"h", 3'600'000.0}, {"hr", 3'600'000.0},
      {"hour", 3'600'000.0}, {"hours", 3'600'000.0}, {"d", day}, {"day", day}, {"days", day},
      {"w", 7 * day},    {"week", 7 * day}, {"weeks", 7 * day}, {"month", 30.44 * day}, {"months", 30.44 * day},
      {"y", 365.25 * day}, {"year", 365.25 * day}, {"years", 365.25 * day},
  };
  for (const auto& u : units)
    if (u.name == unit) return u.ms;
  return std::nullopt;
}

bool is_space(char c) { return c == ' ' || c == '\t'; }

}  // namespace

Result<Millis> parse_duration(std::string_view text) {
  auto is_num = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; };
  // A unit is letters, plus the micro sign (UTF-8 0xC2 0xB5) of systemd's "µs".
  auto is_unit = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '\xc2' || c == '\xb5'; };
  std::size_t pos = 0;
  while (pos < text.size() && is_space(text[pos])) ++pos;
  if (pos == text.size()) return usage_error(text, "empty");

  double total = 0;
  bool bare = true;
  while (pos < text.size()) {
    std::size_t start = pos;
    while (pos < text.size() && is_num(text[pos])) ++pos;
    if (pos == start) return usage_error(text, "expected a number");
    auto value = parse_number(text.substr(start, pos - start));
    if (!value) return usage_error(text, "malformed number");
    while (pos < text.size() && is_space(text[pos])) ++pos;  // "2 h", as systemd.time(7)
    std::size_t unit_start = pos;
    while (pos < text.size() && is_unit(text[pos])) ++pos;
    std::string_view unit = text.substr(unit_start, pos - unit_start);
    while (pos < text.size() && is_space(text[pos])) ++pos;
    if (unit.empty()) {
      if (!bare || pos != text.size()) return usage_error(text, "missing unit");
      total = *value * 1000.0;  // a bare number is seconds, as flock(1)
      break;
    }
    auto scale = unit_ms(unit);
    if (!scale) return usage_error(text, "unknown unit '" + std::string(unit) + "'");
    bare = false;
    total += *value * *scale;
    if (total > max_ms) return usage_error(text, "too long (at most 100 years)");
  }
  if (total > max_ms) return usage_error(text, "too long (at most 100 years)");
  return Millis(static_cast<std::int64_t>(std::llround(total)));
}

std::string format_duration(Millis d) {
  std::int64_t ms = d.count();
  if (ms < 0) return "-" + format_duration(Millis(-ms));
  if (ms == 0) return "0s";
  if (ms < 1000) return std::to_string(ms) + "ms";
  std::string out;
  std::int64_t s = ms / 1000;
  const std::int64_t days = s / 86400, hours = s / 3600 % 24, minutes = s / 60 % 60, seconds = s % 60;
  if (days) out += std::to_string(days) + "d";
  if (hours) out += std::to_string(hours) + "h";
  if (minutes) out += std::to_string(minutes) + "m";
  if (seconds || out.empty()) {
    out += std::to_string(seconds);
    if (ms % 1000 && !days && !hours) {
      std::string frac = std::to_string(ms % 1000 + 1000).substr(1);
      while (!frac.empty() && frac.back() == '0') frac.pop_back();
      out += "." + frac;
    }
    out += "s";
  }
  return out;
}

}  // namespace dblock

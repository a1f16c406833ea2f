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
                                    " (use e.g. 250ms, 30s, 5m, 1h30m, 2d or a number of seconds)");
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

std::optional<double> unit_ms(std::string_view unit) {
  if (unit == "ms") return 1.0;
  if (unit == "s") return 1000.0;
  if (unit == "m") return 60'000.0;
  if (unit == "h") return 3'600'000.0;
  if (unit == "d") return 86'400'000.0;
  return std::nullopt;
}

}  // namespace

Result<Millis> parse_duration(std::string_view text) {
  if (text.empty()) return usage_error(text, "empty");
  auto is_num = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; };

  double total = 0;
  std::size_t pos = 0;
  bool bare = true;
  while (pos < text.size()) {
    std::size_t start = pos;
    while (pos < text.size() && is_num(text[pos])) ++pos;
    if (pos == start) return usage_error(text, "expected a number");
    auto value = parse_number(text.substr(start, pos - start));
    if (!value) return usage_error(text, "malformed number");
    std::size_t unit_start = pos;
    while (pos < text.size() && std::isalpha(static_cast<unsigned char>(text[pos]))) ++pos;
    std::string_view unit = text.substr(unit_start, pos - unit_start);
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

#include "backends/common/identifiers.hpp"

#include <cstdio>

namespace dblock {

std::string quote_identifier(std::string_view name, char quote) {
  std::string out(1, quote);
  for (char c : name) {
    out += c;
    if (c == quote) out += quote;
  }
  out += quote;
  return out;
}

}  // namespace dblock

namespace dblock {

std::int64_t key_hash(std::string_view prefix, std::string_view key) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](unsigned char c) {
    h ^= c;
    h *= 0x100000001b3ULL;
  };
  for (char c : prefix) mix(static_cast<unsigned char>(c));
  mix(0);
  for (char c : key) mix(static_cast<unsigned char>(c));
  return static_cast<std::int64_t>(h);
}

std::string release_channel(std::string_view prefix, std::string_view key) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key_hash(prefix, key)));
  return "dblock_release_" + std::string(hex);
}

}  // namespace dblock

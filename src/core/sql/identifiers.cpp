#include "core/sql/identifiers.hpp"

#include <cstdio>

namespace dblock {

Tables::Tables(const std::string& p, char quote)
    : prefix(p),
      locks(quote_identifier(p + "locks", quote)),
      runs(quote_identifier(p + "runs", quote)),
      claims(quote_identifier(p + "claims", quote)) {}

std::string quote_identifier(std::string_view name, char quote) {
  std::string out(1, quote);
  for (char c : name) out += c == quote ? std::string(2, c) : std::string(1, c);
  return out + quote;
}

std::int64_t key_hash(std::string_view prefix, std::string_view key) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::string_view part : {prefix, std::string_view("\0", 1), key})
    for (char c : part) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return static_cast<std::int64_t>(h);
}

std::string release_channel(std::string_view prefix, std::string_view key) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key_hash(prefix, key)));
  return "dblock_release_" + std::string(hex);
}

}  // namespace dblock

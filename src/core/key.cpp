#include "core/key.hpp"

#include <cstdint>
#include <string>

namespace dblock {
namespace {

// Returns the length of the UTF-8 sequence at text[i], or 0 if it is not valid UTF-8
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
std::size_t utf8_sequence_length(std::string_view text, std::size_t i, std::uint32_t& cp) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char b0 = byte(i);
  std::size_t len;
  std::uint32_t min;
  if (b0 < 0x80) { cp = b0; return 1; }
  if ((b0 & 0xE0) == 0xC0) { len = 2; cp = b0 & 0x1Fu; min = 0x80; }
  else if ((b0 & 0xF0) == 0xE0) { len = 3; cp = b0 & 0x0Fu; min = 0x800; }
  else if ((b0 & 0xF8) == 0xF0) { len = 4; cp = b0 & 0x07u; min = 0x10000; }
  else return 0;
  if (i + len > text.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

}  // namespace

Result<void> validate_key(std::string_view key) {
  if (key.empty()) return fail(ErrorKind::usage, "invalid key: it is empty (1 to 255 bytes of UTF-8)");
  if (key.size() > max_key_bytes)
    return fail(ErrorKind::usage, "invalid key: " + std::to_string(key.size()) +
                                      " bytes long, at most 255 bytes are allowed");
  for (std::size_t i = 0; i < key.size();) {
    std::uint32_t cp = 0;
    std::size_t len = utf8_sequence_length(key, i, cp);
    if (len == 0)
      return fail(ErrorKind::usage, "invalid key: byte " + std::to_string(i + 1) + " is not valid UTF-8");
    if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0))
      return fail(ErrorKind::usage, "invalid key: control character at byte " + std::to_string(i + 1));
    i += len;
  }
  return {};
}

Result<void> validate_table_prefix(std::string_view prefix) {
  auto bad = [&](std::string_view why) {
    return fail(ErrorKind::usage, "invalid table prefix '" + std::string(prefix) + "': " + std::string(why));
  };
  if (prefix.size() > 40) return bad("longer than 40 bytes");
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    char c = prefix[i];
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    bool digit = c >= '0' && c <= '9';
    if (!alpha && !(digit && i > 0))
      return bad("only letters, digits and _ are allowed, not starting with a digit");
  }
  return {};
}

}  // namespace dblock

#include "core/text.hpp"

#include <algorithm>

namespace dblock {

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

std::string escape_controls(std::string_view text, std::string_view also) {
  constexpr const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    std::uint32_t cp = 0;
    std::size_t len = utf8_sequence_length(text, i, cp);
    const bool plain = len == 1 ? also.find(text[i]) == std::string_view::npos : len > 1;
    if (plain && !is_control(cp)) {
      out.append(text.substr(i, len));
      i += len;
      continue;
    }
    // An invalid byte is escaped alone: the next one may start a valid sequence.
    for (std::size_t k = 0; k < std::max<std::size_t>(len, 1); ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      out += "\\x";
      out += hex[b >> 4];
      out += hex[b & 0xF];
    }
    i += std::max<std::size_t>(len, 1);
  }
  return out;
}

}  // namespace dblock

#include "core/key.hpp"

#include <cstdint>
#include <string>

#include "core/text.hpp"

namespace dblock {
namespace {

// Keys and owners: 1 to 255 bytes of UTF-8 with no control character, so whatever the database
// gives back prints as it was written, and every backend's column holds it.
Result<void> validate_text(std::string_view what, std::string_view text) {
  const std::string invalid = "invalid " + std::string(what) + ": ";
  if (text.empty()) return fail(ErrorKind::usage, invalid + "it is empty (1 to 255 bytes of UTF-8)");
  if (text.size() > max_key_bytes)
    return fail(ErrorKind::usage, invalid + std::to_string(text.size()) + " bytes long, at most 255 bytes are allowed");
  for (std::size_t i = 0; i < text.size();) {
    std::uint32_t cp = 0;
    std::size_t len = utf8_sequence_length(text, i, cp);
    if (len == 0) return fail(ErrorKind::usage, invalid + "byte " + std::to_string(i + 1) + " is not valid UTF-8");
    if (is_control(cp)) return fail(ErrorKind::usage, invalid + "control character at byte " + std::to_string(i + 1));
    i += len;
  }
  return {};
}

}  // namespace

Result<void> validate_key(std::string_view key) { return validate_text("key", key); }

Result<void> validate_owner(std::string_view owner) { return validate_text("owner", owner); }

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

std::string error_line(std::string_view key, const Error& error) {
  const std::string quoted = "'" + std::string(key) + "'";
  if (key.empty() || error.kind == ErrorKind::usage || error.message.find(quoted) != std::string::npos)
    return error.message;
  return quoted + ": " + error.message;
}

}  // namespace dblock

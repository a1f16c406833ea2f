#pragma once
// UTF-8 text that comes from users (keys, owners) or from the lock tables: one decoder, one rule
// for what is printable, and one way to make any string safe for a terminal or a log line.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dblock {

/// The length of the UTF-8 sequence at text[i] (its code point in `cp`), or 0 when it is not
/// valid UTF-8 (overlong forms, surrogates and code points above U+10FFFF are invalid).
std::size_t utf8_sequence_length(std::string_view text, std::size_t i, std::uint32_t& cp);

/// C0 controls, DEL and C1 controls: what moves a terminal's cursor or starts an escape sequence.
constexpr bool is_control(std::uint32_t cp) { return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0); }

/// `text` with every control character, every byte that is not valid UTF-8 and every character of
/// `also` written as \xHH (one per byte), for printing a string someone else may have stored.
/// Every printer of stored text goes through this (stderr, the log sinks, tables, check's line).
std::string escape_controls(std::string_view text, std::string_view also = {});

}  // namespace dblock

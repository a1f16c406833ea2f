#pragma once
// Lock keys and owners (dblock(1), OPTIONS): 1 to 255 bytes of UTF-8, no control characters.

#include <string>
#include <string_view>

#include "core/error.hpp"

namespace dblock {

inline constexpr std::size_t max_key_bytes = 255;

/// Ok, or ErrorKind::usage naming what is wrong with the key.
Result<void> validate_key(std::string_view key);

/// The same rule for a holder's owner (--owner): ok, or ErrorKind::usage naming what is wrong.
Result<void> validate_owner(std::string_view owner);

/// Ok, or ErrorKind::usage: a table prefix must be a plain SQL identifier ([A-Za-z_][A-Za-z0-9_]*, at most 40 bytes).
Result<void> validate_table_prefix(std::string_view prefix);

/// The line for an error while working on `key`: "'KEY': message", so a farm's logs tell which
/// job failed; the message alone when it names 'KEY' already, when `key` is empty, or for a
/// usage error (that one is about the options, not the key).
std::string error_line(std::string_view key, const Error& error);

}  // namespace dblock

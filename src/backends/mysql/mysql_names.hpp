#pragma once
// A key's wake and queue names (GET_LOCK names; wake_statements in mysql_statements.cpp), computed
// here once and bound as parameters (:wake, :queue; Connection::run supplies them from :key), so
// the statements that take or give them back stay short.

#include <string>
#include <string_view>

namespace dblock::mysql {

/// SHA-256 of `bytes`, as 64 lowercase hex digits (MySQL's SHA2(bytes, 256)).
std::string sha256_hex(std::string_view bytes);

/// `label` + the first `digits` hex digits of SHA-256 over `database`, a NUL byte, `prefix`, a
/// NUL byte and `key`: one key's GET_LOCK name, at most 64 characters (the server's limit). All
/// parts as bytes: two databases (or table prefixes) on one server never share a name.
/// `database` is the session's DATABASE(), as the server spells it.
std::string lock_name(std::string_view database, std::string_view prefix, std::string_view label, int digits,
                      std::string_view key);

/// The label and the hash's digits of the name a row lock's holder keeps while it holds the key
/// (its holder tag, SessionLock::tag), the lock session's own tag after them.
inline constexpr std::string_view held_label = "dblock-held:";
inline constexpr int held_digits = 20;
/// That name of `key` for the session's `tag` (32 hex digits): 64 characters.
std::string held_name(std::string_view database, std::string_view prefix, std::string_view key, std::string_view tag);

/// The name a key's holder keeps while it holds the key, which the waiter at the head of the
/// key's queue blocks on ("dblock-wake:" + 52 hex digits).
std::string wake_name(std::string_view database, std::string_view prefix, std::string_view key);
/// The name a key's waiters queue for: its holder is the one that blocks on the wake name
/// ("dblock-queue:" + 51 hex digits).
std::string queue_name(std::string_view database, std::string_view prefix, std::string_view key);

}  // namespace dblock::mysql

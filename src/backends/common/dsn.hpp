#pragma once
// DSNs (dblock(1), DSN): the scheme picks a backend from the registry (parse_dsn in registry.hpp), and that backend parses
// and checks the rest itself (mysql_dsn.cpp, postgres_dsn.cpp, sqlite_dsn.cpp). Passwords are
// found by one function here, password_ranges(), and every message, log line and argv scrub
// hides them through it.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace dblock {

struct Dsn {
  std::string backend;   // registry name: "sqlite", "mysql", "postgres"
  std::string text;      // as given: may hold a password, never print it
  std::string redacted;  // safe for messages: every password replaced by ****

  /// True when the DSN carries a password (for the argv warning).
  bool has_password() const { return redacted != text; }
};

/// [begin, end) of a URI DSN's user info (scheme://USER[:PASSWORD]@host), found as libpq finds
/// it: up to the last '@' before the first '/'. nullopt when there is none.
std::optional<std::pair<std::size_t, std::size_t>> uri_user_info(std::string_view text);

/// [begin, end) from just after "scheme://" to the last '@' of a URI DSN whose user info holds
/// a password that clients would not all read as written: a raw '/' before its '@' (so an '@'
/// after the host part), or more than one '@' (libpq ends the user info at the first, dblock's
/// MySQL parser at the last). nullopt for every other DSN.
std::optional<std::pair<std::size_t, std::size_t>> misread_user_info(std::string_view text);

/// ErrorKind::config, before any client sees it, for a DSN misread_user_info() finds.
Result<void> check_user_info(const Dsn& dsn);

/// [begin, end) byte ranges of every password in a DSN: URI user info
/// (scheme://user:PASSWORD@host) and password=... (query parameter, its name percent-decoded, or
/// libpq keyword/value form, quoted or not). The one place that knows where passwords hide.
std::vector<std::pair<std::size_t, std::size_t>> password_ranges(std::string_view text);

/// The DSN with every password replaced by ****, for every message and log line.
std::string redact_dsn(std::string_view text);

/// `message` (from a driver that may quote parts of the DSN) with the DSN text redacted where it
/// appears whole, and each password of `dsn_text` (as written or decoded) replaced by **** where
/// it stands as a whole token.
std::string redact_message(std::string message, std::string_view dsn_text);

/// The error every backend's DSN check returns: "invalid DSN '<redacted>': why".
std::unexpected<Error> invalid_dsn(const Dsn& dsn, std::string_view why);

/// Percent-decoding for URI parts; nullopt on a bad escape.
std::optional<std::string> percent_decode(std::string_view text);

/// The default database of this user (dblock(1), FILES) and the state directory it lives under.
struct DefaultLocation {
  std::string dsn;        // sqlite:<path>
  std::string state_dir;  // /var/lib, $XDG_STATE_HOME or the home directory, without trailing '/'
};

/// Where the default database is for this user; creates nothing. ErrorKind::config when a user
/// has neither HOME nor a home directory in the passwd database (never a place under /tmp).
Result<DefaultLocation> default_location();

}  // namespace dblock

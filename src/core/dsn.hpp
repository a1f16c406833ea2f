#pragma once
// DSN parsing and redaction (dblock(1), DSN). Passwords never leave this struct except to the driver.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace dblock {

struct Dsn {
  std::string backend;   // "sqlite", "mysql", "postgres"
  std::string text;      // as given: may hold a password, never print it
  std::string redacted;  // safe for messages: password replaced by ****

  std::string path;      // sqlite: the database file

  // mysql (user and password percent-decoded)
  std::string user;
  std::optional<std::string> password;
  std::string host;
  std::optional<unsigned> port;
  std::string database;
  std::vector<std::pair<std::string, std::string>> params;  // validated names, in order given

  /// The value of a mysql query parameter, if given.
  std::optional<std::string> param(std::string_view name) const;
  /// True when the DSN carries a password (for the argv warning).
  bool has_password() const;
};

/// Parses any supported DSN; ErrorKind::config with a message that never contains the password.
Result<Dsn> parse_dsn(std::string_view text);

/// The DSN with any password replaced by ****, for every message and log line.
std::string redact_dsn(std::string_view text);

/// sqlite:<default path> for this user (dblock(1), DSN); creates nothing.
std::string default_dsn();

}  // namespace dblock

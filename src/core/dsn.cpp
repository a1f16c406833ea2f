#include "core/dsn.hpp"

#include <unistd.h>

#include <array>
#include <cstdlib>

namespace dblock {
namespace {

constexpr std::string_view redacted_password = "****";

// The parameters dblock(1) DSN allows in a mysql:// DSN; anything else is a config error.
constexpr std::array<std::string_view, 8> mysql_params{
    "socket", "ssl-mode", "ssl-ca", "ssl-cert", "ssl-key", "connect-timeout", "option-file", "option-group"};

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

// Finds "scheme://" and returns the scheme, or "" when there is none.
std::string_view scheme_of(std::string_view text) {
  auto colon = text.find(':');
  if (colon == std::string_view::npos) return {};
  return text.substr(0, colon);
}

Result<Dsn> config_error(const Dsn& dsn, std::string_view why) {
  return fail(ErrorKind::config, "invalid DSN '" + dsn.redacted + "': " + std::string(why));
}

Result<Dsn> parse_sqlite(Dsn dsn) {
  std::string_view rest = std::string_view(dsn.text).substr(std::string_view("sqlite:").size());
  if (starts_with(rest, "//")) rest.remove_prefix(2);
  if (rest.empty()) return config_error(dsn, "no database file (use sqlite:/path/to/file.db)");
  dsn.path = std::string(rest);
  return dsn;
}

Result<Dsn> parse_mysql(Dsn dsn) {
  std::string_view text = dsn.text;
  auto sep = text.find("://");
  if (sep == std::string_view::npos) return config_error(dsn, "expected mysql://[user[:password]@]host[:port]/database");
  std::string_view rest = text.substr(sep + 3);

  std::string_view query;
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  std::string_view path;
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    path = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  // The password may contain '@' only percent-encoded, so the last '@' ends the user info.
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    std::string_view user = userinfo, pass;
    bool has_pass = false;
    if (auto colon = userinfo.find(':'); colon != std::string_view::npos) {
      user = userinfo.substr(0, colon);
      pass = userinfo.substr(colon + 1);
      has_pass = true;
    }
    auto u = percent_decode(user);
    if (!u) return config_error(dsn, "bad percent-encoding in the user name");
    dsn.user = *u;
    if (has_pass) {
      auto p = percent_decode(pass);
      if (!p) return config_error(dsn, "bad percent-encoding in the password");
      dsn.password = *p;
    }
  }
  std::string_view hostport = rest;
  if (starts_with(hostport, "[")) {
    auto close = hostport.find(']');
    if (close == std::string_view::npos) return config_error(dsn, "unterminated [IPv6 address]");
    dsn.host = std::string(hostport.substr(1, close - 1));
    hostport = hostport.substr(close + 1);
    if (!hostport.empty()) {
      if (hostport.front() != ':') return config_error(dsn, "junk after [IPv6 address]");
      hostport.remove_prefix(1);
      if (hostport.empty()) return config_error(dsn, "empty port");
    }
  } else if (auto colon = hostport.rfind(':'); colon != std::string_view::npos) {
    dsn.host = std::string(hostport.substr(0, colon));
    hostport = hostport.substr(colon + 1);
    if (hostport.empty()) return config_error(dsn, "empty port");
  } else {
    dsn.host = std::string(hostport);
    hostport = {};
  }
  if (!hostport.empty()) {
    unsigned port = 0;
    for (char c : hostport) {
      if (c < '0' || c > '9') return config_error(dsn, "port is not a number");
      port = port * 10 + static_cast<unsigned>(c - '0');
      if (port > 65535) return config_error(dsn, "port out of range");
    }
    if (port == 0) return config_error(dsn, "port out of range");
    dsn.port = port;
  }
  auto db = percent_decode(path);
  if (!db) return config_error(dsn, "bad percent-encoding in the database name");
  dsn.database = *db;
  if (dsn.database.empty()) return config_error(dsn, "no database name (mysql://host/DATABASE)");

  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (item.empty()) continue;
    auto eq = item.find('=');
    std::string name(item.substr(0, eq));
    auto value = percent_decode(eq == std::string_view::npos ? std::string_view{} : item.substr(eq + 1));
    if (!value) return config_error(dsn, "bad percent-encoding in parameter " + name);
    bool known = false;
    for (auto p : mysql_params) known = known || p == name;
    if (!known)
      return config_error(dsn, "unknown parameter '" + name +
                                   "' (known: socket, ssl-mode, ssl-ca, ssl-cert, ssl-key, connect-timeout, "
                                   "option-file, option-group)");
    if (name == "ssl-mode" && *value != "DISABLED" && *value != "PREFERRED" && *value != "REQUIRED" &&
        *value != "VERIFY_CA" && *value != "VERIFY_IDENTITY")
      return config_error(dsn, "ssl-mode must be DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY");
    dsn.params.emplace_back(name, *value);
  }
  if (dsn.host.empty() && !dsn.param("socket")) return config_error(dsn, "no host (or ?socket=/path)");
  return dsn;
}

// Replaces the value after "password=" (keyword/value or query form) up to the next separator.
void redact_keyword(std::string& text) {
  for (std::size_t pos = 0; (pos = text.find("password=", pos)) != std::string::npos;) {
    bool at_word_start = pos == 0 || text[pos - 1] == ' ' || text[pos - 1] == '?' || text[pos - 1] == '&';
    pos += std::string_view("password=").size();
    if (!at_word_start) continue;
    std::size_t end = pos;
    if (end < text.size() && text[end] == '\'') {
      ++end;
      while (end < text.size() && text[end] != '\'') end += text[end] == '\\' ? 2 : 1;
      end = std::min(end + 1, text.size());
    } else {
      while (end < text.size() && text[end] != ' ' && text[end] != '&') ++end;
    }
    text.replace(pos, end - pos, redacted_password);
    pos += redacted_password.size();
  }
}

}  // namespace

std::optional<std::string> Dsn::param(std::string_view name) const {
  for (const auto& [key, value] : params)
    if (key == name) return value;
  return std::nullopt;
}

bool Dsn::has_password() const {
  return password.has_value() || redacted != text;
}

std::string redact_dsn(std::string_view text) {
  std::string out(text);
  // URI user info: scheme://user:PASSWORD@host
  if (auto sep = out.find("://"); sep != std::string::npos) {
    std::size_t start = sep + 3;
    std::size_t end = out.find_first_of("/?", start);
    if (end == std::string::npos) end = out.size();
    std::size_t at = out.rfind('@', end);
    if (at != std::string::npos && at >= start) {
      std::size_t colon = out.find(':', start);
      if (colon != std::string::npos && colon < at)
        out.replace(colon + 1, at - colon - 1, redacted_password);
    }
  }
  redact_keyword(out);
  return out;
}

Result<Dsn> parse_dsn(std::string_view text) {
  Dsn dsn;
  dsn.text = std::string(text);
  dsn.redacted = redact_dsn(text);
  std::string_view scheme = scheme_of(text);
  if (scheme == "sqlite") {
    dsn.backend = "sqlite";
    return parse_sqlite(std::move(dsn));
  }
  if (scheme == "mysql" || scheme == "mariadb") {
    dsn.backend = "mysql";
    return parse_mysql(std::move(dsn));
  }
  if (scheme == "postgres" || scheme == "postgresql") {
    dsn.backend = "postgres";
    if (!starts_with(text, std::string(scheme) + "://"))
      return config_error(dsn, "expected postgres://[user[:password]@]host[:port]/database");
    return dsn;  // libpq parses the URI itself, so every libpq parameter works
  }
  if (text.empty()) return config_error(dsn, "empty DSN");
  return config_error(dsn, "unknown scheme (use sqlite:/path.db, mysql://..., mariadb://..., postgres://...)");
}

std::string default_dsn() {
  if (geteuid() == 0) return "sqlite:/var/lib/dblock/dblock.db";
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && *state == '/')
    return std::string("sqlite:") + state + "/dblock/dblock.db";
  const char* home = std::getenv("HOME");
  return std::string("sqlite:") + (home && *home ? home : "/tmp") + "/.local/state/dblock/dblock.db";
}

}  // namespace dblock

#include "backends/mysql/mysql_dsn.hpp"

#include <algorithm>
#include <charconv>
#include <cctype>
#include <limits>
#include <map>

namespace dblock::mysql {
namespace {

// A whole number from 1 to `max`, written in decimal digits only.
std::optional<unsigned> number_in(std::string_view text, unsigned max) {
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > max) return std::nullopt;
  return value;
}

// host, [v6], host:port, [v6]:port: fills host and port.
Result<void> parse_host_port(const Dsn& dsn, std::string_view hostport, MysqlDsn& out) {
  std::size_t colon = hostport.rfind(':');
  if (hostport.starts_with("[")) {
    const auto close = hostport.find(']');
    if (close == std::string_view::npos) return invalid_dsn(dsn, "unterminated [IPv6 address]");
    if (close + 1 < hostport.size() && hostport[close + 1] != ':') return invalid_dsn(dsn, "junk after [IPv6 address]");
    out.host = std::string(hostport.substr(1, close - 1));
    colon = close + 1 < hostport.size() ? close + 1 : std::string_view::npos;
  } else {
    out.host = std::string(hostport.substr(0, colon));
  }
  if (colon == std::string_view::npos) return {};
  const std::string_view port = hostport.substr(colon + 1);
  if (port.empty()) return invalid_dsn(dsn, "empty port");
  if (!std::ranges::all_of(port, [](char c) { return c >= '0' && c <= '9'; })) return invalid_dsn(dsn, "port is not a number");
  out.port = number_in(port, 65535);
  if (!out.port) return invalid_dsn(dsn, "port out of range");
  return {};
}

// Parameters whose value is taken as written.
const std::map<std::string, std::optional<std::string> MysqlDsn::*, std::less<>> text_params{
    {"socket", &MysqlDsn::socket}, {"ssl-ca", &MysqlDsn::ssl_ca},           {"ssl-cert", &MysqlDsn::ssl_cert},
    {"ssl-key", &MysqlDsn::ssl_key}, {"option-file", &MysqlDsn::option_file},
};

Result<void> set_param(const Dsn& dsn, const std::string& name, std::string value, MysqlDsn& out) {
  if (name == "ssl-mode") {
    std::ranges::transform(value, value.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    if (value != "DISABLED" && value != "PREFERRED" && value != "REQUIRED" && value != "VERIFY_CA" &&
        value != "VERIFY_IDENTITY")
      return invalid_dsn(dsn, "ssl-mode must be DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY");
    out.ssl_mode = std::move(value);
  } else if (name == "connect-timeout") {
    out.connect_timeout_s = number_in(value, std::numeric_limits<unsigned>::max());
    if (!out.connect_timeout_s) return invalid_dsn(dsn, "connect-timeout must be a whole number of seconds >= 1");
  } else if (auto field = text_params.find(name); field != text_params.end()) {
    out.*(field->second) = std::move(value);
  } else if (name == "option-group") {
    out.option_group = std::move(value);
  } else {
    return invalid_dsn(dsn, "unknown parameter '" + name +
                                "' (known: socket, ssl-mode, ssl-ca, ssl-cert, ssl-key, connect-timeout, option-file, "
                                "option-group)");
  }
  return {};
}

}  // namespace

Result<MysqlDsn> parse_mysql_dsn(const Dsn& dsn) {
  const std::string_view text = dsn.text;
  const auto sep = text.find("://");
  if (sep == std::string_view::npos) return invalid_dsn(dsn, "expected mysql://[user[:password]@]host[:port]/database");
  std::string_view rest = text.substr(sep + 3);
  MysqlDsn out;
  // The user info first, found where every redaction finds it (a password may hold '?').
  if (auto found = uri_user_info(text)) {
    const std::string_view userinfo = text.substr(found->first, found->second - found->first);
    rest = text.substr(found->second + 1);
    const auto colon = userinfo.find(':');
    if (colon != std::string_view::npos) {
      auto password = percent_decode(userinfo.substr(colon + 1));
      if (!password) return invalid_dsn(dsn, "bad percent-encoding in the password");
      out.password = std::move(*password);
    }
    auto user = percent_decode(userinfo.substr(0, colon));
    if (!user) return invalid_dsn(dsn, "bad percent-encoding in the user name");
    out.user = std::move(*user);
  }
  const auto q = rest.find('?');
  std::string_view query = q == std::string_view::npos ? "" : rest.substr(q + 1);
  rest = rest.substr(0, q);
  const auto slash = rest.find('/');
  auto database = percent_decode(slash == std::string_view::npos ? "" : rest.substr(slash + 1));
  if (auto ok = parse_host_port(dsn, rest.substr(0, slash), out); !ok) return std::unexpected(ok.error());
  if (!database) return invalid_dsn(dsn, "bad percent-encoding in the database name");
  out.database = std::move(*database);
  if (out.database.empty()) return invalid_dsn(dsn, "no database name (mysql://host/DATABASE)");
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? "" : query.substr(amp + 1);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    std::string name(item.substr(0, eq));
    auto value = percent_decode(eq == std::string_view::npos ? "" : item.substr(eq + 1));
    if (!value) return invalid_dsn(dsn, "bad percent-encoding in parameter " + name);
    if (auto ok = set_param(dsn, name, std::move(*value), out); !ok) return std::unexpected(ok.error());
  }
  if (out.host.empty() && !out.socket) return invalid_dsn(dsn, "no host (or ?socket=/path)");
  return out;
}

}  // namespace dblock::mysql

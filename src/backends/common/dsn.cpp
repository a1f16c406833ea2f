#include "backends/common/dsn.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

namespace dblock {
namespace {

constexpr std::string_view mask = "****";

// password=VALUE: a URI query parameter (after ? or &) or a libpq keyword/value pair (at the
// start or after a space). libpq percent-decodes a parameter's name before it compares it, so
// "pass%77ord=" is a password too. Only the text from `from` on is searched: a URI's
// parameters come after its user info.
// A URI's value ends at '&' only (libpq reads "?password=a b&..." as "a b"); a keyword/value
// pair's at a space.
void keyword_ranges(std::string_view text, std::size_t from, std::vector<std::pair<std::size_t, std::size_t>>& out) {
  const bool uri = text.find("://") != std::string_view::npos;
  for (std::size_t eq = from; (eq = text.find('=', eq)) != std::string_view::npos;) {
    std::size_t name_start = text.find_last_of(" ?&", eq);
    name_start = name_start == std::string_view::npos || name_start < from ? from : name_start + 1;
    const std::string_view name = text.substr(name_start, eq - name_start);
    std::size_t end = ++eq;
    if (name != "password" && percent_decode(name) != "password") continue;
    if (end < text.size() && text[end] == '\'') {  // libpq's quoted value, with \-escapes
      ++end;
      while (end < text.size() && text[end] != '\'') end += text[end] == '\\' ? 2 : 1;
      end = std::min(end + 1, text.size());
    } else {
      while (end < text.size() && text[end] != '&' && (uri || text[end] != ' ')) ++end;
    }
    out.emplace_back(eq, end);
    eq = end;
  }
}

// A byte that continues a word: a password found next to one is part of some other word.
bool word_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  return std::isalnum(u) || c == '_' || u >= 0x80;
}

void replace_all(std::string& text, std::string_view what, std::string_view with, bool whole_token) {
  if (what.empty()) return;
  for (std::size_t pos = 0; (pos = text.find(what, pos)) != std::string::npos;) {
    const std::size_t after = pos + what.size();
    if (whole_token && ((pos > 0 && word_byte(text[pos - 1])) || (after < text.size() && word_byte(text[after])))) {
      ++pos;
      continue;
    }
    text.replace(pos, what.size(), with);
    pos += with.size();
  }
}

}  // namespace

std::optional<std::pair<std::size_t, std::size_t>> uri_user_info(std::string_view text) {
  const std::size_t sep = text.find("://");
  if (sep == std::string_view::npos) return std::nullopt;
  const std::size_t start = sep + 3;
  // libpq looks for the '@' up to the first '/' only, so a '?' before it belongs to the
  // password ("alice:se?cret@host"); of several '@' the last is taken, so a raw '@' in a
  // password counts as password too.
  const std::size_t at = text.substr(0, text.find('/', start)).rfind('@');
  if (at == std::string_view::npos || at < start) return std::nullopt;
  return std::pair{start, at};
}

std::optional<std::pair<std::size_t, std::size_t>> misread_user_info(std::string_view text) {
  const std::size_t sep = text.find("://");
  if (sep == std::string_view::npos) return std::nullopt;
  const std::size_t start = sep + 3;
  const std::size_t host_part_end = std::min(text.find('/', start), text.size());
  if (host_part_end == start) return std::nullopt;  // scheme:///path: no host part, no user info
  const std::size_t at = text.rfind('@');
  if (at == std::string_view::npos || at < start) return std::nullopt;
  // No ':' before it: no password, nothing to hide, and the '@' may be a parameter's.
  if (text.find(':', start) >= at) return std::nullopt;
  // One '@', in the host part: every client reads it alike.
  if (at < host_part_end && text.find('@', start) == at) return std::nullopt;
  return std::pair{start, at};
}

std::vector<std::pair<std::size_t, std::size_t>> password_ranges(std::string_view text) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  std::size_t params_from = 0;
  if (auto misread = misread_user_info(text)) {
    // Everything between the scheme and the last '@': a raw '/' in the password puts part of
    // it in the host, port or path of whoever reads it otherwise (such a DSN is refused).
    out.push_back(*misread);
    params_from = misread->second + 1;
  } else if (auto user_info = uri_user_info(text)) {
    const auto [start, at] = *user_info;
    if (const std::size_t colon = text.find(':', start); colon < at) out.emplace_back(colon + 1, at);
    params_from = at + 1;
  }
  keyword_ranges(text, params_from, out);
  std::ranges::sort(out);
  return out;
}

std::string redact_dsn(std::string_view text) {
  std::string out;
  std::size_t copied = 0;
  for (const auto& [begin, end] : password_ranges(text)) {
    if (begin < copied) {  // inside the range just masked
      copied = std::max(copied, end);
      continue;
    }
    out.append(text.substr(copied, begin - copied));
    out.append(mask);
    copied = end;
  }
  out.append(text.substr(copied));
  return out;
}

std::string redact_message(std::string message, std::string_view dsn_text) {
  replace_all(message, dsn_text, redact_dsn(dsn_text), false);
  // A password alone only as a whole token: the password "p" must leave "port" alone (and
  // so not show where in the text it would have been).
  for (const auto& [begin, end] : password_ranges(dsn_text)) {
    std::string_view written = dsn_text.substr(begin, end - begin);
    if (written.size() >= 2 && written.front() == '\'' && written.back() == '\'') written = written.substr(1, written.size() - 2);
    replace_all(message, written, mask, true);
    if (auto decoded = percent_decode(written)) replace_all(message, *decoded, mask, true);
  }
  // A DSN clients misread is refused before one sees it; should a message quote it anyway, the
  // password and each piece a client would have taken for a host, port or path (split where
  // it split them) are hidden.
  if (auto misread = misread_user_info(dsn_text)) {
    std::string_view password = dsn_text.substr(misread->first, misread->second - misread->first);
    password.remove_prefix(password.find(':') + 1);
    replace_all(message, password, mask, true);
    for (std::size_t from = 0; from < password.size();) {
      const std::size_t to = std::min(password.find_first_of("/@#? :", from), password.size());
      if (to - from >= 3) replace_all(message, password.substr(from, to - from), mask, true);
      from = to + 1;
    }
  }
  return message;
}

Result<void> check_user_info(const Dsn& dsn) {
  if (!misread_user_info(dsn.text)) return {};
  return invalid_dsn(dsn,
                     "a raw '/' or '@' in the user name or password (or an '@' after the host): a client would "
                     "read part of the password as the host or database; percent-encode '/' as %2F and '@' as %40");
}

std::unexpected<Error> invalid_dsn(const Dsn& dsn, std::string_view why) {
  return fail(ErrorKind::config, "invalid DSN '" + dsn.redacted + "': " + redact_message(std::string(why), dsn.text));
}

std::optional<std::string> percent_decode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    unsigned char byte = static_cast<unsigned char>(text[i]);
    if (byte == '%') {
      const char* hex = text.data() + i + 1;
      if (i + 2 >= text.size() || std::from_chars(hex, hex + 2, byte, 16).ptr != hex + 2) return std::nullopt;
      i += 2;
    }
    out += static_cast<char>(byte);
  }
  return out;
}

namespace {

// HOME, else the passwd entry's home when it exists: a user without a home of their own gets
// no default (never one under /tmp, where another user could have made the directories first).
std::optional<std::string> home_directory() {
  if (const char* home = std::getenv("HOME"); home && *home == '/') return home;
  const long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buffer(size > 0 ? static_cast<std::size_t>(size) : 16384);
  passwd entry{};
  passwd* found = nullptr;
  if (::getpwuid_r(::geteuid(), &entry, buffer.data(), buffer.size(), &found) != 0 || !found) return std::nullopt;
  struct stat st{};
  if (found->pw_dir[0] != '/' || ::stat(found->pw_dir, &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  return found->pw_dir;
}

std::string without_trailing_slashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

}  // namespace

Result<DefaultLocation> default_location() {
  if (::geteuid() == 0) return DefaultLocation{"sqlite:/var/lib/dblock/dblock.db", "/var/lib"};
  std::string root, below;
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && *state == '/') {
    root = without_trailing_slashes(state);
  } else if (auto home = home_directory()) {
    root = without_trailing_slashes(*home);
    below = "/.local/state";
  } else {
    return fail(ErrorKind::config,
                "no default database: HOME is not set and this user has no home directory; give a DSN "
                "(--dsn or DBLOCK_DSN)");
  }
  return DefaultLocation{"sqlite:" + (root == "/" ? "" : root) + below + "/dblock/dblock.db", root};
}

}  // namespace dblock

#include "backends/common/dsn.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace dblock {
namespace {

constexpr std::string_view mask = "****";

// password= as a query parameter (after ? or &) or a libpq keyword (at the start or after a space).
void keyword_ranges(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>& out) {
  constexpr std::string_view keyword = "password=";
  for (std::size_t pos = 0; (pos = text.find(keyword, pos)) != std::string_view::npos;) {
    const bool at_word_start = pos == 0 || text[pos - 1] == ' ' || text[pos - 1] == '?' || text[pos - 1] == '&';
    pos += keyword.size();
    if (!at_word_start) continue;
    std::size_t end = pos;
    if (end < text.size() && text[end] == '\'') {  // libpq's quoted value, with \-escapes
      ++end;
      while (end < text.size() && text[end] != '\'') end += text[end] == '\\' ? 2 : 1;
      end = std::min(end + 1, text.size());
    } else {
      while (end < text.size() && text[end] != ' ' && text[end] != '&') ++end;
    }
    out.emplace_back(pos, end);
    pos = end;
  }
}

}  // namespace

std::vector<std::pair<std::size_t, std::size_t>> password_ranges(std::string_view text) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  // URI user info: scheme://user:PASSWORD@host; the password may hold '@' only percent-encoded,
  // so the last '@' before the path ends it.
  if (auto sep = text.find("://"); sep != std::string_view::npos) {
    const std::size_t start = sep + 3;
    std::size_t end = text.find_first_of("/?", start);
    if (end == std::string_view::npos) end = text.size();
    const std::size_t at = text.rfind('@', end);
    if (at != std::string_view::npos && at >= start) {
      const std::size_t colon = text.find(':', start);
      if (colon != std::string_view::npos && colon < at) out.emplace_back(colon + 1, at);
    }
  }
  keyword_ranges(text, out);
  std::ranges::sort(out);
  return out;
}

std::string redact_dsn(std::string_view text) {
  std::string out;
  std::size_t copied = 0;
  for (const auto& [begin, end] : password_ranges(text)) {
    if (begin < copied) continue;
    out.append(text.substr(copied, begin - copied));
    out.append(mask);
    copied = end;
  }
  out.append(text.substr(copied));
  return out;
}

std::string redact_message(std::string message, std::string_view dsn_text) {
  for (const auto& [begin, end] : password_ranges(dsn_text)) {
    std::string_view written = dsn_text.substr(begin, end - begin);
    if (written.size() >= 2 && written.front() == '\'' && written.back() == '\'') written = written.substr(1, written.size() - 2);
    std::vector<std::string> forms{std::string(written)};
    if (auto decoded = percent_decode(written); decoded && *decoded != written) forms.push_back(*decoded);
    for (const auto& secret : forms) {
      if (secret.empty()) continue;
      for (std::size_t pos = 0; (pos = message.find(secret, pos)) != std::string::npos; pos += mask.size())
        message.replace(pos, secret.size(), mask);
    }
  }
  return message;
}

std::unexpected<Error> invalid_dsn(const Dsn& dsn, std::string_view why) {
  return fail(ErrorKind::config, "invalid DSN '" + dsn.redacted + "': " + redact_message(std::string(why), dsn.text));
}

std::unexpected<Error> no_lock_database(std::string_view where) {
  std::string message = "no lock database at ";
  message += where;
  message += " (nothing has run here yet, or the DSN is wrong; `dblock init` creates it)";
  return fail(ErrorKind::other, std::move(message));
}

std::optional<std::string> percent_decode(std::string_view text) {
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int hi = hex(text[i + 1]), lo = hex(text[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
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

#include "backends/postgres/postgres_dsn.hpp"

namespace dblock::postgres {

Result<Conninfo> parse_postgres_dsn(const Dsn& dsn) {
  char* err = nullptr;
  Conninfo parsed(PQconninfoParse(dsn.text.c_str(), &err));
  if (parsed) return parsed;
  const std::string why = err ? one_line(err) : "out of memory";
  PQfreemem(err);
  // libpq quotes the offending token ("invalid percent-encoded token: ..."), which may be the
  // password; invalid_dsn hides it.
  return invalid_dsn(dsn, why);
}

Result<void> check_postgres_dsn(const Dsn& dsn) {
  if (!dsn.text.starts_with("postgres://") && !dsn.text.starts_with("postgresql://"))
    return invalid_dsn(dsn, "expected postgres://[user[:password]@]host[:port]/database");
  if (auto parsed = parse_postgres_dsn(dsn); !parsed) return std::unexpected(parsed.error());
  return {};
}

const char* conninfo_value(const PQconninfoOption* o, std::string_view keyword) {
  for (; o && o->keyword; ++o)
    if (keyword == o->keyword) return o->val && *o->val ? o->val : nullptr;
  return nullptr;
}

std::string one_line(std::string_view message) {
  std::string out;
  bool line_ended = false;
  for (char c : message) {
    if (c == '\n' || c == '\r') {
      line_ended = !out.empty();
    } else if (c == '\t' || (c == ' ' && (out.empty() || out.back() == ' '))) {
      if (!out.empty() && out.back() != ' ' && !line_ended) out += ' ';
    } else {
      // libpq ends a line without a full stop ("Connection refused\n\tIs the server running
      // ...?"): joined, the sentence keeps its end.
      if (line_ended) out += std::string_view(".:;!?,").find(out.back()) == std::string_view::npos ? ". " : " ";
      line_ended = false;
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace dblock::postgres

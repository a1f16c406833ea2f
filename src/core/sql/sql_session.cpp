#include "core/sql/sql_session.hpp"

#include <algorithm>
#include <charconv>

namespace dblock::sql {

Params::Params(std::initializer_list<std::pair<std::string_view, Value>> values) {
  for (const auto& [name, value] : values) set(name, value);
}

Params& Params::set(std::string_view name, Value value) {
  auto it = std::ranges::find(values_, name, &std::pair<std::string, Value>::first);
  if (it != values_.end()) it->second = std::move(value);
  else values_.emplace_back(std::string(name), std::move(value));
  return *this;
}

Params& Params::set(const Params& other) {
  for (const auto& [n, v] : other.values_) set(n, v);
  return *this;
}

const Value* Params::find(std::string_view name) const {
  for (const auto& [n, v] : values_)
    if (n == name) return &v;
  return nullptr;
}

std::int64_t Rows::Row::int64(int column) const {
  const std::string& s = *cell(column);
  if (s == "t" || s == "true") return 1;
  if (s == "f" || s == "false") return 0;
  std::int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

namespace {
bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9'); }
bool is_special(char c) { return c == ':' || c == '\'' || c == '"' || c == '`'; }
}  // namespace

Compiled compile(std::string_view text, PlaceholderStyle style) {
  Compiled out;
  out.text.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    // Plain text a run at a time (a statement is mostly that; the char-by-char copy was a
    // third of the compile, docs/performance.md), then the quote or colon that ends it.
    std::size_t special = i;
    while (special < text.size() && !is_special(text[special])) ++special;
    out.text.append(text.substr(i, special - i));
    i = special;
    if (i >= text.size()) break;
    const char c = text[i];
    if (c != ':') {
      // A quoted string or identifier, to its closing quote or the end ('it''s' is two).
      const std::size_t close = std::min(text.find(c, i + 1), text.size() - 1);
      out.text.append(text.substr(i, close - i + 1));
      i = close + 1;
      continue;
    }
    const bool cast = i + 1 < text.size() && text[i + 1] == ':';  // ::bigint
    if (cast || i + 1 >= text.size() || !name_start(text[i + 1])) {
      out.text.append(cast ? "::" : ":");
      i += cast ? 2 : 1;
      continue;
    }
    std::size_t end = i + 1;
    while (end < text.size() && name_char(text[end])) ++end;
    std::string name(text.substr(i + 1, end - i - 1));
    i = end;
    if (style == PlaceholderStyle::question) {
      out.names.push_back(std::move(name));
      out.text += '?';
      continue;
    }
    auto it = std::ranges::find(out.names, name);
    const auto number = static_cast<std::size_t>(it - out.names.begin()) + 1;
    if (it == out.names.end()) out.names.push_back(std::move(name));
    out.text += style == PlaceholderStyle::dollar ? '$' : '?';
    out.text += std::to_string(number);
  }
  return out;
}

const Compiled& CompiledCache::get(const Statement& st) {
  auto it = compiled_.find(st.text);
  if (it == compiled_.end()) it = compiled_.emplace(st.text, compile(st.text, style_)).first;
  return it->second;
}

Result<std::vector<const Value*>> bind_order(const Compiled& compiled, const Params& params, std::string_view id) {
  std::vector<const Value*> out;
  out.reserve(compiled.names.size());
  for (const std::string& name : compiled.names) {
    const Value* v = params.find(name);
    if (!v) return fail(ErrorKind::internal, "statement " + std::string(id) + ": no value for :" + name);
    out.push_back(v);
  }
  return out;
}

Result<Transaction> Transaction::begin(Session& session, std::string_view begin_sql) {
  if (auto ok = session.exec(begin_sql); !ok) return std::unexpected(ok.error());
  return Transaction(session);
}

Transaction::~Transaction() {
  if (session_) (void)session_->exec("ROLLBACK");
}

Result<void> Transaction::commit() { return commit_last(false); }

Result<void> Transaction::commit_last(bool last) {
  Session* s = std::exchange(session_, nullptr);
  auto ok = last ? s->exec_last("COMMIT") : s->exec("COMMIT");
  // A COMMIT that failed may leave the transaction open (SQLite: SQLITE_BUSY): end it.
  if (!ok) (void)s->exec("ROLLBACK");
  return ok;
}

AheadAnswer ahead_answer(const Result<Rows>& waited) {
  if (!waited) return waited.error().kind == ErrorKind::wait_ended ? AheadAnswer::bound_reached : AheadAnswer::untold;
  const bool timed_out = !waited->empty() && (*waited)[0].columns() > 0 && !(*waited)[0].is_null(0) &&
                         (*waited)[0].int64(0) == 0;
  return timed_out ? AheadAnswer::bound_reached : AheadAnswer::let_in;
}

Result<Rows> Session::run_behind(const Statement& ahead, const Params& ahead_params, const Statement& st,
                                 const Params& params, Millis, AheadAnswer& answer) {
  auto waited = run(ahead, ahead_params);
  answer = ahead_answer(waited);
  if (answer == AheadAnswer::untold && !waited) return std::unexpected(waited.error());
  return run(st, params);
}

}  // namespace dblock::sql

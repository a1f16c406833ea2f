#include "core/sql/statement_catalog.hpp"

#include <algorithm>
#include <cctype>
#include <optional>

namespace dblock::sql {

void StatementCatalog::add(const Statement& s, std::string_view variant) {
  if (s.empty()) return;
  auto same_id = [&](const Statement& listed) { return listed.id == s.id; };
  auto found = std::find_if(list_.begin(), list_.end(), same_id);
  if (found == list_.end()) {
    list_.push_back(s);
    return;
  }
  if (found->text == s.text) return;
  const std::string id = s.id + " (" + std::string(variant.empty() ? "variant" : variant) + ")";
  for (const Statement& listed : list_)
    if (listed.id == id && listed.text == s.text) return;
  list_.push_back({id, s.text});
}

void StatementCatalog::add(const LeaseStatements& s, std::string_view v) {
  add(Statement{"lease.begin", s.begin}, v);
  add(Statement{"lease.begin_release", s.begin_release}, v);
  for (const Statement* st : {&s.take, &s.taken, &s.session_take, &s.refusal, &s.renew, &s.release,
                              &s.release_recorded, &s.history.add, &s.history.oldest, &s.history.trim,
                              &s.history.record, &s.header_take, &s.header_refusal, &s.lock_row})
    add(*st, v);
  add(s.failover, v);
}

void StatementCatalog::add(const FailoverStatements& s, std::string_view v) {
  for (const Statement* st : {&s.read, &s.create, &s.max_token, &s.move, &s.raise_ttl}) add(*st, v);
}

void StatementCatalog::add(const ShedlockStatements& s, std::string_view v) {
  add(Statement{"shedlock.begin", s.begin}, v);
  for (const Statement* st : {&s.take, &s.number, &s.numbered, &s.holder, &s.extend, &s.extend_own, &s.unlock,
                              &s.finish, &s.named_holder, &s.released})
    add(*st, v);
}

void StatementCatalog::add(const InspectStatements& s, std::string_view v) {
  for (const Statement* st : {&s.status_all, &s.status_keys, &s.history_all, &s.history_of, &s.now_ms, &s.slot_count,
                              &s.renew_named, &s.renewed, &s.renew_own})
    add(*st, v);
  // Each older shape named by the first column it lacks.
  if (s.older) add(*s.older, "a table of an older dblock, before " + s.older->lacks.front().second);
}

void StatementCatalog::add(const ReleaseStatements& s, std::string_view v) {
  for (const Statement* st : {&s.holder, &s.release, &s.end_session, &s.session_gone}) add(*st, v);
}

void StatementCatalog::add(const DoctorStatements& s, std::string_view v) {
  add(s.server, v);
  for (const PrivilegeProbe& p : s.probe)
    add(Statement{"doctor.probe " + p.privilege + " " + p.table, p.statement.text}, v);
  add(s.can_create, v);
  for (const Statement& check : s.checks) add(Statement{"doctor.check " + check.id, check.text}, v);
  add(s.session_id, v);
}

void StatementCatalog::add(const SchemaStatements& s, std::string_view v) {
  add(Statement{"schema.begin", s.begin}, v);
  for (const SchemaStatements::Create& c : s.create) {
    const bool index = c.sql.find("CREATE INDEX") != std::string::npos;
    add(Statement{"schema.create " + std::string(index ? "index on " : "") + c.table, c.sql}, v);
  }
  for (const SchemaStatements::Added& a : s.added) add(Statement{"schema.add_column " + a.column, a.add}, v);
  add(s.columns, v);
}

void StatementCatalog::add(const LockStatements& s, std::string_view v) {
  add(Statement{"lock.begin", s.begin}, v);
  for (const Statement* st : {&s.advisory_try, &s.advisory_wait, &s.advisory_holds, &s.advisory_give_back,
                              &s.advisory_numbered_try, &s.advisory_numbered_wait, &s.advisory_released,
                              &s.advisory_release_row,
                              &s.lock_wait, &s.lock_claim, &s.lock_claim_nowait, &s.make_claim, &s.insert_claim,
                              &s.tag, &s.untag, &s.holds_claim, &s.alive, &s.row_release_ended, &s.row_numbered,
                              &s.gate_take, &s.gate_wait, &s.gate_give, &s.grant_wait})
    add(*st, v);
}

namespace {

struct Token {
  std::string text;
  bool space = false;  // whitespace before it in the source
};

// A token, or a parenthesized group of them.
struct Node {
  Token token;  // "(" for a group
  bool group = false;
  std::vector<Node> kids;
  bool close_space = false;  // whitespace before its ")"
};

bool word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == ':' || c == '.' || c == '@';
}

bool operator_char(char c) { return std::string_view("<>=!~|+-*/%&^#").find(c) != std::string_view::npos; }

std::vector<Token> tokenize(std::string_view sql) {
  std::vector<Token> out;
  bool space = false;
  for (std::size_t i = 0; i < sql.size();) {
    const char c = sql[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = true;
      ++i;
      continue;
    }
    std::size_t end = i + 1;
    if (c == '\'' || c == '"' || c == '`') {
      // Quoted: to the closing quote; a doubled one is part of the text.
      while (end < sql.size()) {
        if (sql[end] == c && !(end + 1 < sql.size() && sql[end + 1] == c)) break;
        end += sql[end] == c ? 2 : 1;
      }
      end = std::min(end + 1, sql.size());
    } else if (word_char(c)) {
      while (end < sql.size() && word_char(sql[end])) ++end;
    } else if (operator_char(c)) {
      while (end < sql.size() && operator_char(sql[end])) ++end;
    }
    out.push_back({std::string(sql.substr(i, end - i)), space});
    space = false;
    i = end;
  }
  return out;
}

// The tokens as a tree of parentheses; nullopt when they do not balance.
std::optional<std::vector<Node>> parse(const std::vector<Token>& tokens, std::size_t& i, bool inner) {
  std::vector<Node> seq;
  while (i < tokens.size()) {
    const Token& t = tokens[i++];
    if (t.text == ")") {
      if (!inner) return std::nullopt;
      seq.push_back({t, false, {}, false});  // the marker parse_group takes off
      return seq;
    }
    if (t.text == "(") {
      auto kids = parse(tokens, i, true);
      if (!kids || kids->empty() || kids->back().token.text != ")" || kids->back().group) return std::nullopt;
      const bool close_space = kids->back().token.space;
      kids->pop_back();
      seq.push_back({t, true, std::move(*kids), close_space});
      continue;
    }
    seq.push_back({t, false, {}, false});
  }
  if (inner) return std::nullopt;
  return seq;
}

bool is_word(const Node& n, std::string_view w) { return !n.group && n.token.text == w; }

bool is_subquery(const Node& n) {
  if (!n.group || n.kids.empty()) return false;
  for (std::string_view w : {"SELECT", "WITH", "INSERT", "UPDATE", "DELETE"})
    if (is_word(n.kids.front(), w)) return true;
  return false;
}

// Whether seq[i] is inside the BEGIN ... END of a block's error handler (DECLARE ... HANDLER FOR
// ... BEGIN ROLLBACK; RESIGNAL; END), which stays on the line that declares it: the block's
// prologue, not its work.
bool in_handler(const std::vector<Node>& seq, std::size_t i) {
  std::size_t j = i;
  while (j > 0 && !is_word(seq[j - 1], "HANDLER")) --j;
  if (j == 0) return false;
  int open = 0;
  for (; j < i; ++j) {
    const bool closes_other = j + 1 < seq.size() && (is_word(seq[j + 1], "IF") || is_word(seq[j + 1], "LOOP"));
    if (is_word(seq[j], "BEGIN") || is_word(seq[j], "CASE")) ++open;
    if (is_word(seq[j], "END") && !closes_other) --open;
  }
  return open > 0;
}

// Whether seq[i] begins a clause of the query seq is part of.
bool starts_clause(const std::vector<Node>& seq, std::size_t i) {
  if (i == 0) return false;
  const Node& n = seq[i];
  const Node& prev = seq[i - 1];
  if (is_word(prev, ";")) return !in_handler(seq, i);
  if (n.group) return false;
  const std::string& w = n.token.text;
  const Node* next = i + 1 < seq.size() ? &seq[i + 1] : nullptr;
  if (w == "FROM") return !is_word(prev, "DELETE") && !is_word(prev, "DISTINCT");  // IS DISTINCT FROM
  if (w == "UPDATE") return !is_word(prev, "DO") && !is_word(prev, "KEY") && !is_word(prev, "FOR");
  if (w == "VALUES") return !(next && next->group && !next->token.space);  // VALUES(col): MySQL's function
  if (w == "ON") return next && (is_word(*next, "CONFLICT") || is_word(*next, "DUPLICATE"));
  if (w == "FOR") return next && is_word(*next, "UPDATE");
  if (w == "JOIN") return !is_word(prev, "LEFT") && !is_word(prev, "INNER") && !is_word(prev, "CROSS");
  if (w == "WITH") return !(next && is_word(*next, "TIME"));  // TIMESTAMP WITH TIME ZONE: a type
  if (w == "SET" && i >= 2 && is_word(seq[i - 2], "SQLSTATE")) return false;  // SIGNAL's own SET
  for (std::string_view clause : {"SELECT", "WHERE", "SET", "RETURNING", "UNION", "ORDER", "GROUP", "HAVING",
                                  "INSERT", "DELETE", "WITH", "LEFT", "INNER", "CROSS"})
    if (w == clause) return !(w == "SELECT" && is_word(prev, "ALL") && i >= 2 && is_word(seq[i - 2], "UNION"));
  return false;
}

// Whether a broken clause starts a new line before n (AND, OR, CASE's words, ||; not the AND of
// BETWEEN, which `between` tracks).
bool breaks_before(const Node& n, bool& between) {
  if (n.group) return false;
  const std::string& w = n.token.text;
  if (w == "BETWEEN") between = true;
  if (w == "AND" && between) {
    between = false;
    return false;
  }
  if (w == "||") return true;
  return w == "AND" || w == "OR" || w == "WHEN" || w == "THEN" || w == "ELSE";
}

class Layout {
 public:
  explicit Layout(int width) : width_(width) {}

  std::string text() && {
    trim();
    return std::move(out_);
  }

  // A query: each clause on a line of its own, `trailing` columns to leave after the last.
  void query(const std::vector<Node>& seq, int trailing) {
    const int indent = line_indent_;
    std::size_t begin = 0;
    for (std::size_t i = 1; i <= seq.size(); ++i) {
      if (i < seq.size() && !starts_clause(seq, i)) continue;
      if (begin > 0) newline(indent);
      clause(seq, begin, i, indent + 2, i == seq.size() ? trailing : 0);
      begin = i;
    }
  }

 private:
  // seq[begin, end) on this line when it fits, else one part a line: a part ends before AND,
  // OR, WHEN, THEN, ELSE, || and after a comma (short list items, a column list, share a line);
  // the parts after the first at `cont`, `trailing` columns left after the last.
  void clause(const std::vector<Node>& seq, std::size_t begin, std::size_t end, int cont, int trailing) {
    if (column_ + width_of(seq, begin, end) + trailing <= width_) {
      for (std::size_t i = begin; i < end; ++i) flat(seq[i]);
      return;
    }
    std::vector<std::size_t> parts{begin};
    bool between = false;
    // A CASE ... END that fits on its part's line stays whole (not broken before its WHEN,
    // THEN and ELSE).
    std::size_t whole_until = begin;
    for (std::size_t i = begin; i < end; ++i) {
      if (i >= whole_until && is_word(seq[i], "CASE")) {
        const std::size_t last = case_end(seq, i, end);
        const int at = parts.back() == begin ? column_ : cont;
        if (last < end && at + width_of(seq, parts.back(), last + 1) + 1 <= width_) whole_until = last + 1;
      }
      // A CASE starts its line with its first WHEN when that fits there whole (not a line of
      // its own).
      const bool first_when = i > begin && is_word(seq[i], "WHEN") && is_word(seq[i - 1], "CASE") &&
                              (parts.back() == begin ? column_ : cont) +
                                      width_of(seq, parts.back(), branch_end(seq, i, end)) <=
                                  width_;
      if (i > begin && i >= whole_until && breaks_before(seq[i], between) && parts.back() != i && !first_when)
        parts.push_back(i);
      // A WHEN, THEN or ELSE that fits its line stays whole (its ANDs and ORs are one test).
      if (i > begin && i >= whole_until && is_branch(seq[i])) {
        const std::size_t next = branch_end(seq, i, end);
        if (cont + width_of(seq, i, std::min(next + 1, end)) + 1 <= width_) whole_until = next;
      }
      if (i + 1 >= whole_until && is_word(seq[i], ",") && i + 1 < end) parts.push_back(i + 1);
    }
    parts.push_back(end);
    std::size_t line_from = 0;  // the part that began the line, where one did
    for (std::size_t p = 0; p + 1 < parts.size(); ++p) {
      const std::size_t a = parts[p], b = parts[p + 1];
      const int tail = b == end ? trailing : 0;
      if (p > 0) {
        // A short list item shares the line of the item before it, when that one was on one
        // line; the operands of || share lines too (one string, read along).
        const std::size_t before = parts[p - 1];
        const bool after_whole = (before == begin || is_word(seq[before - 1], ",")) &&
                                 cont + width_of(seq, before, a) <= width_;
        const bool item = is_word(seq[a - 1], ",") && (b == end || is_word(seq[b - 1], ","));
        // The item after a short one that began its line (a clause's keyword and a column) shares
        // that line too, long or not, where it fits.
        const bool after_short = line_from == p - 1 && short_item(seq, before, a);
        const bool shared = (item && (short_item(seq, a, b) || after_short) && after_whole) || is_word(seq[a], "||");
        if (!(shared && column_ + width_of(seq, a, b) + tail <= width_)) {
          newline(cont);
          line_from = p;
        }
      }
      if (column_ + width_of(seq, a, b) + tail <= width_) {
        for (std::size_t i = a; i < b; ++i) flat(seq[i]);
        continue;
      }
      line_from = parts.size();  // broken: no part began the line it ends on
      for (std::size_t i = a; i < b; ++i) {
        // A word that would cross the width (after a group broken above it) starts a line.
        if (!seq[i].group && !line_start_ && column_ + flat_width(seq[i]) > width_) newline(cont);
        node(seq[i], words_after(seq, i + 1, b) + (b == end ? trailing : 0));
      }
    }
  }

  // The END that closes the CASE at seq[i] (CASEs nest), or `end` when the clause has none.
  static std::size_t case_end(const std::vector<Node>& seq, std::size_t i, std::size_t end) {
    int depth = 0;
    for (; i < end; ++i) {
      if (is_word(seq[i], "CASE")) ++depth;
      if (is_word(seq[i], "END") && --depth == 0) return i;
    }
    return end;
  }

  static bool is_branch(const Node& n) { return is_word(n, "WHEN") || is_word(n, "THEN") || is_word(n, "ELSE"); }

  // The WHEN, THEN, ELSE or END after the branch at seq[i] (not a nested CASE's), or `end`.
  static std::size_t branch_end(const std::vector<Node>& seq, std::size_t i, std::size_t end) {
    int depth = 0;
    for (++i; i < end; ++i) {
      if (is_word(seq[i], "CASE")) ++depth;
      if (depth == 0 && (is_branch(seq[i]) || is_word(seq[i], "END"))) return i;
      if (is_word(seq[i], "END")) --depth;
    }
    return end;
  }

  // A list item short enough to share its line with its neighbours (a column, a value, an
  // expression of at most half a line): a list reads down its lines, at most two long items a
  // line, and a take's columns do not each spend a line of the minute a DBA has for it.
  bool short_item(const std::vector<Node>& seq, std::size_t begin, std::size_t end) const {
    return width_of(seq, begin, end) <= width_ / 2 - 2;
  }

  // A token, or a group: on this line when it fits with the `trailing` columns after it, else
  // broken under its parenthesis.
  void node(const Node& n, int trailing) {
    if (!n.group || n.kids.empty() || column_ + flat_width(n) + trailing <= width_) {
      flat(n);
      return;
    }
    put("(", n.token.space);
    const int outer = line_indent_;
    // Under its parenthesis when it fits a line of its own there, else, where it can, its
    // first part after the parenthesis and the others under it.
    const bool whole_below = outer + 2 + width_of(n.kids, 0, n.kids.size()) + trailing + 1 <= width_;
    if (!whole_below && hangs(n, trailing)) {
      clause(n.kids, 0, n.kids.size(), outer + 2, trailing + 1);
      line_indent_ = outer;
      put(")", false);
      return;
    }
    newline(outer + 2);
    if (is_subquery(n))
      query(n.kids, trailing + 1);
    else
      clause(n.kids, 0, n.kids.size(), outer + 2, trailing + 1);
    line_indent_ = outer;
    put(")", false);
  }

  // Whether the group n, broken, starts on the line of its "(" (a list, a condition): when its
  // first part fits there and each other one on a line of its own, so no group inside it is
  // broken (a reader never has to tell two levels of continuation lines apart).
  bool hangs(const Node& n, int trailing) const {
    if (is_subquery(n)) return false;
    const std::vector<Node>& kids = n.kids;
    std::size_t a = 0;
    for (std::size_t i = 1; i <= kids.size(); ++i) {
      const bool last = i == kids.size();
      if (!last && !is_word(kids[i - 1], ",") && !is_word(kids[i], "AND") && !is_word(kids[i], "OR") &&
          !is_word(kids[i], "||"))
        continue;
      const int at = a == 0 ? column_ : line_indent_ + 2;
      if (at + width_of(kids, a, i) + (last ? trailing + 1 : 0) > width_) return false;
      a = i;
    }
    return true;
  }

  void flat(const Node& n) {
    put(n.token.text, n.token.space);
    if (!n.group) return;
    for (const Node& kid : n.kids) flat(kid);
    put(")", n.close_space);
  }

  static int flat_width(const Node& n) {
    int w = static_cast<int>(n.token.text.size()) + (n.token.space ? 1 : 0);
    if (!n.group) return w;
    for (const Node& kid : n.kids) w += flat_width(kid);
    return w + 1 + (n.close_space ? 1 : 0);
  }

  static int width_of(const std::vector<Node>& seq, std::size_t begin, std::size_t end) {
    int w = 0;
    for (std::size_t i = begin; i < end; ++i) w += flat_width(seq[i]);
    return w;
  }

  // The width of the tokens from seq[i] up to the next group or `end`: what must follow a
  // group on its line.
  static int words_after(const std::vector<Node>& seq, std::size_t i, std::size_t end) {
    int w = 0;
    for (; i < end && !seq[i].group; ++i) w += flat_width(seq[i]);
    return w;
  }

  void put(std::string_view s, bool space) {
    if (space && !line_start_ && !out_.empty() && out_.back() != '(') {
      out_ += ' ';
      ++column_;
    }
    out_ += s;
    column_ += static_cast<int>(s.size());
    line_start_ = false;
  }

  void newline(int indent) {
    trim();
    out_ += '\n';
    out_.append(static_cast<std::size_t>(indent), ' ');
    column_ = indent;
    line_indent_ = indent;
    line_start_ = true;
  }

  void trim() {
    while (!out_.empty() && out_.back() == ' ') out_.pop_back();
  }

  int width_;
  std::string out_;
  int column_ = 0;
  int line_indent_ = 0;
  bool line_start_ = true;
};

}  // namespace

std::string format_sql(std::string_view sql, int width) {
  if (sql.find('\n') != std::string_view::npos) return std::string(sql);
  const std::vector<Token> tokens = tokenize(sql);
  std::size_t i = 0;
  const auto tree = parse(tokens, i, false);
  if (!tree) return std::string(sql);
  Layout layout(width);
  layout.query(*tree, 1);  // and its ";"
  return std::move(layout).text();
}

}  // namespace dblock::sql

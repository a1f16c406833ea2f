#include "backends/mysql/mysql_statement.hpp"

namespace dblock::mysql {

std::size_t placeholder_count(std::string_view sql) {
  std::size_t count = 0;
  char quote = 0;
  for (std::size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (quote) {
      if (c == '\\' && quote != '`') ++i;  // a backslash escapes the next byte in a string literal
      else if (c == quote) quote = 0;      // a doubled quote closes and reopens: same count
    } else if (c == '\'' || c == '"' || c == '`') {
      quote = c;
    } else if (c == '?') {
      ++count;
    }
  }
  return count;
}

Sql& Sql::append(std::string_view text, std::span<const Param> values) {
  const std::size_t wanted = placeholder_count(text);
  if (wanted != values.size() && broken_.empty())
    broken_ = "\"" + std::string(text) + "\" has " + std::to_string(wanted) + " placeholders but " +
              std::to_string(values.size()) + " values";
  text_ += text;
  params_.insert(params_.end(), values.begin(), values.end());
  return *this;
}

Sql& Sql::add(const Sql& fragment) {
  if (broken_.empty()) broken_ = fragment.broken_;
  text_ += fragment.text_;
  params_.insert(params_.end(), fragment.params_.begin(), fragment.params_.end());
  return *this;
}

Result<void> Sql::check() const {
  if (!broken_.empty()) return fail(ErrorKind::internal, "mysql statement: " + broken_);
  const std::size_t wanted = placeholder_count(text_);
  if (wanted != params_.size())
    return fail(ErrorKind::internal, "mysql statement has " + std::to_string(wanted) + " placeholders but " +
                                         std::to_string(params_.size()) + " values: " + text_);
  return {};
}

}  // namespace dblock::mysql

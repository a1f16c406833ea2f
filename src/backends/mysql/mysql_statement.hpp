#pragma once
// A MySQL statement built together with its bound values: each piece of SQL text is added
// with the values of its own `?` placeholders, so adding a column or a condition can never
// shift the values of the others. Values own their bytes (no views into temporaries).
// No client library here, so the builder is unit-tested without a server.

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/error.hpp"

namespace dblock::mysql {

/// A bound parameter: NULL, an integer, a number, or bytes (keys are bytes, never text).
class Param {
 public:
  using Value = std::variant<std::nullptr_t, std::int64_t, double, std::string>;

  Param(std::nullptr_t = nullptr) {}
  template <std::integral I>
    requires(!std::same_as<I, bool>)
  Param(I n) : value_(static_cast<std::int64_t>(n)) {}
  Param(double d) : value_(d) {}
  Param(std::string_view s) : value_(std::string(s)) {}
  Param(const char* s) : value_(std::string(s)) {}
  Param(std::string s) : value_(std::move(s)) {}
  template <class T>
  Param(const std::optional<T>& v) {
    if (v) value_ = Param(*v).value_;
  }

  const Value& value() const { return value_; }

 private:
  Value value_;
};

/// The `?` placeholders in SQL text, not counting those inside '...', "..." or `...`.
std::size_t placeholder_count(std::string_view sql);

class Sql {
 public:
  Sql() = default;
  /// SQL text with the values of its placeholders, in order: Sql("name = ? AND token = ?", key, token).
  template <class... V>
  explicit Sql(std::string_view text, const V&... values) {
    add(text, values...);
  }

  /// Appends text and the values of its own placeholders; a count that disagrees marks the
  /// statement broken (check() says where) rather than shifting later values.
  template <class... V>
  Sql& add(std::string_view text, const V&... values) {
    return add(text, {Param(values)...});
  }
  Sql& add(std::string_view text, std::initializer_list<Param> values) {
    return append(text, std::span<const Param>(values.begin(), values.size()));
  }
  Sql& add(std::string_view text, std::span<const Param> values) { return append(text, values); }
  /// Appends a fragment built elsewhere, with its values.
  Sql& add(const Sql& fragment);

  /// internal when a piece's placeholders and values disagree, or the whole statement's do.
  Result<void> check() const;

  const std::string& text() const { return text_; }
  std::span<const Param> params() const { return params_; }

 private:
  Sql& append(std::string_view text, std::span<const Param> values);

  std::string text_;
  std::vector<Param> params_;
  std::string broken_;  // the first piece whose placeholders and values disagree
};

}  // namespace dblock::mysql

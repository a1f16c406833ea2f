#pragma once
// Table names: the prefix is checked once, where options are read (core/key.cpp,
// validate_table_prefix), and every dialect quotes through this one function, which escapes the
// quote character it uses, so a name can never end the identifier early whatever reaches it.

#include <cstdint>
#include <string>
#include <string_view>

namespace dblock {

/// A table prefix's dblock tables, each name quoted with `quote` (how the dialect's statements
/// name them).
struct Tables {
  Tables(const std::string& prefix, char quote);
  std::string prefix;
  std::string locks, runs, claims;
  /// The table `table` ("locks", "runs", "claims") by its own name, unquoted: as a catalog
  /// (information_schema) holds it.
  std::string unquoted(std::string_view table) const { return prefix + std::string(table); }
};

/// `name` between `quote` characters, each `quote` inside doubled (SQL's rule for "..." and
/// MySQL's for `...`).
std::string quote_identifier(std::string_view name, char quote);

/// A key's 64-bit id: FNV-1a over the table prefix, a NUL, then the key. Stable across versions
/// and hosts (PostgreSQL's advisory lock ids are these); a collision only makes two keys share
/// an advisory lock or a wake-up.
std::int64_t key_hash(std::string_view prefix, std::string_view key);

/// The name a release of `key` is announced under (PostgreSQL NOTIFY channel): at most 63
/// bytes whatever the key's length, so it carries key_hash.
std::string release_channel(std::string_view prefix, std::string_view key);

}  // namespace dblock

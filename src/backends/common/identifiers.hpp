#pragma once
// Table names: the prefix is checked once, where options are read (core/key.cpp,
// validate_table_prefix), and every dialect quotes through this one function, which escapes the
// quote character it uses, so a name can never end the identifier early whatever reaches it.

#include <string>
#include <string_view>

namespace dblock {

/// `name` between `quote` characters, each `quote` inside doubled (SQL's rule for "..." and
/// MySQL's for `...`).
std::string quote_identifier(std::string_view name, char quote);

}  // namespace dblock

#pragma once
// "Did you mean ...?" for a mistyped subcommand or config key.

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace dblock {

/// The candidate closest to `word` by edit distance (insert, delete, substitute, swap two
/// neighbours), if it is close enough to be a typo: at most 2 edits and no more than half of
/// the word's length ("rn" is "run"). Ties go to the earlier candidate.
std::optional<std::string> closest_match(std::string_view word, std::span<const std::string> candidates);

}  // namespace dblock

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/suggest.hpp"

using dblock::closest_match;

TEST_CASE("did-you-mean suggests the closest subcommand or key for a typo") {
  const std::vector<std::string> subcommands{"run", "acquire", "renew", "release", "status", "history", "init"};
  CHECK(closest_match("stauts", subcommands) == "status");  // two letters swapped: one edit
  CHECK(closest_match("relase", subcommands) == "release");  // a letter left out
  CHECK(closest_match("histroy", subcommands) == "history");
  CHECK(closest_match("runn", subcommands) == "run");
  CHECK(closest_match("rn", subcommands) == "run");  // one edit in a two-letter word
  const std::vector<std::string> keys{"dsn", "dsn-file", "strategy", "table-prefix"};
  CHECK(closest_match("dns", keys) == "dsn");
  CHECK(closest_match("stratgey", keys) == "strategy");
}

TEST_CASE("did-you-mean stays quiet when nothing is close") {
  const std::vector<std::string> subcommands{"run", "status", "history"};
  CHECK_FALSE(closest_match("frobnicate", subcommands).has_value());
  CHECK_FALSE(closest_match("xy", subcommands).has_value());  // too short for 2 edits to be a typo
  CHECK_FALSE(closest_match("", subcommands).has_value());
  CHECK_FALSE(closest_match("status", std::vector<std::string>{}).has_value());
}

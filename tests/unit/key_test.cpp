#include <doctest/doctest.h>

#include "core/key.hpp"
#include "core/text.hpp"

using namespace dblock;

TEST_CASE("keys: 1 to 255 bytes of UTF-8 without control characters") {
  CHECK(validate_key("nightly-report").has_value());
  CHECK(validate_key("it's; DROP TABLE x; -- 100% \"quoted\"").has_value());
  CHECK(validate_key("Grüße, 東京, ключ").has_value());
  CHECK(validate_key(std::string(255, 'k')).has_value());
  // 85 three-byte characters = 255 bytes exactly
  std::string cjk;
  for (int i = 0; i < 85; ++i) cjk += "東";
  CHECK(validate_key(cjk).has_value());
}

TEST_CASE("bad keys are usage errors naming the problem") {
  auto check_bad = [](std::string key, const char* fragment) {
    CAPTURE(key);
    auto r = validate_key(key);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().kind == ErrorKind::usage);
    CHECK(r.error().message.find(fragment) != std::string::npos);
  };
  check_bad("", "empty");
  check_bad(std::string(256, 'k'), "256 bytes");
  check_bad("tab\there", "control character");
  check_bad(std::string("nul\0x", 5), "control character");
  check_bad("del\x7f", "control character");
  check_bad("c1\xc2\x85", "control character");
  check_bad("bad\xff", "not valid UTF-8");
  check_bad("overlong\xc0\xaf", "not valid UTF-8");
  check_bad("surrogate\xed\xa0\x80", "not valid UTF-8");
  check_bad("truncated\xe6\x9d", "not valid UTF-8");
}

TEST_CASE("table prefixes are plain identifiers") {
  CHECK(validate_table_prefix("dblock_").has_value());
  CHECK(validate_table_prefix("").has_value());
  CHECK(validate_table_prefix("App2_").has_value());
  for (const char* bad : {"1x", "a-b", "a b", "x;drop", "\"q\"", "ä"}) {
    CAPTURE(bad);
    auto r = validate_table_prefix(bad);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().kind == ErrorKind::usage);
  }
  CHECK_FALSE(validate_table_prefix(std::string(41, 'a')).has_value());
}

TEST_CASE("owners follow the key's rule") {
  CHECK(validate_owner("web1:4242:9f3a1c").has_value());
  CHECK(validate_owner(std::string(255, 'o')).has_value());
  for (std::string bad : {std::string("a\rb"), std::string("\x1b[2K"), std::string(256, 'o'), std::string("\xff"),
                          std::string("\xc2\x9b")}) {
    CAPTURE(bad);
    auto result = validate_owner(bad);
    REQUIRE_FALSE(result.has_value());
    CHECK(result.error().kind == ErrorKind::usage);
    CHECK(result.error().message.find("invalid owner") != std::string::npos);
  }
}

TEST_CASE("escape_controls: what a terminal would act on is shown as \\xhh") {
  CHECK(escape_controls("plain Grüße 東京") == "plain Grüße 東京");
  CHECK(escape_controls("evil\r\x1b[2K") == "evil\\x0d\\x1b[2K");
  CHECK(escape_controls("a\nb\tc\x7f") == "a\\x0ab\\x09c\\x7f");
  CHECK(escape_controls("c1 \xc2\x9b end") == "c1 \\xc2\\x9b end");     // CSI as a C1 control
  CHECK(escape_controls("bad \xff\xc3(") == "bad \\xff\\xc3(");          // invalid UTF-8, byte by byte
  CHECK(escape_controls("app|x=1", "|") == "app\\x7cx=1");
  CHECK(escape_controls("back\\slash") == "back\\slash");
}

TEST_CASE("error_line: an error about a key names it once, a usage error does not") {
  const Error db{ErrorKind::config, "cannot open the database"};
  CHECK(error_line("nightly", db) == "'nightly': cannot open the database");
  CHECK(error_line("", db) == "cannot open the database");
  CHECK(error_line("nightly", Error{ErrorKind::lost, "lost 'nightly'"}) == "lost 'nightly'");
  CHECK(error_line("nightly", Error{ErrorKind::usage, "--ttl 2s is too short"}) == "--ttl 2s is too short");
}

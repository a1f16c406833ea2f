#include <doctest/doctest.h>

#include "core/duration.hpp"

using namespace dblock;
using namespace std::chrono_literals;

TEST_CASE("durations in every documented form") {
  CHECK(parse_duration("250ms").value() == 250ms);
  CHECK(parse_duration("30s").value() == 30s);
  CHECK(parse_duration("5m").value() == 5min);
  CHECK(parse_duration("1h30m").value() == 90min);
  CHECK(parse_duration("2d").value() == 48h);
  CHECK(parse_duration("5").value() == 5s);
  CHECK(parse_duration("0.5").value() == 500ms);
  CHECK(parse_duration("0").value() == 0ms);
  CHECK(parse_duration("1.5s").value() == 1500ms);
}

TEST_CASE("systemd.time(7) time spans are durations too") {
  CHECK(parse_duration("10min").value() == 10min);
  CHECK(parse_duration("2sec").value() == 2s);
  CHECK(parse_duration("1h 30min").value() == 90min);
  CHECK(parse_duration("2 h").value() == 2h);
  CHECK(parse_duration("500us").value() == 1ms);  // rounded to the millisecond
  CHECK(parse_duration("1500usec").value() == 2ms);
  CHECK(parse_duration("55s500ms").value() == 55500ms);
  CHECK(parse_duration("2hours").value() == 2h);
  CHECK(parse_duration("48hr").value() == 48h);
  CHECK(parse_duration("1w").value() == 168h);
  CHECK(parse_duration("5 seconds").value() == 5s);
  CHECK(parse_duration(" 30s ").value() == 30s);
  CHECK(parse_duration("1y").value() == std::chrono::milliseconds(31'557'600'000));
}

TEST_CASE("bad durations are usage errors naming the problem") {
  for (const char* bad : {"", "abc", "5x", "-1", "1h30", "s", "1.2.3", "5 s x", ".5", "5.", "1e3", "30S", "5M", "10 mins", " "}) {
    CAPTURE(bad);
    auto d = parse_duration(bad);
    REQUIRE_FALSE(d.has_value());
    CHECK(d.error().kind == ErrorKind::usage);
    CHECK(d.error().message.find("invalid duration") != std::string::npos);
  }
  CHECK_FALSE(parse_duration("999999d").has_value());
}

TEST_CASE("durations format back to the short form") {
  CHECK(format_duration(250ms) == "250ms");
  CHECK(format_duration(30s) == "30s");
  CHECK(format_duration(90min) == "1h30m");
  CHECK(format_duration(48h) == "2d");
  CHECK(format_duration(1500ms) == "1.5s");
  CHECK(format_duration(0ms) == "0s");
}

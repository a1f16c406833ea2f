#include <doctest/doctest.h>

#include "support/test_env.hpp"

TEST_CASE("placeholder") { CHECK(dblock::test::backend_name().size() > 0); }

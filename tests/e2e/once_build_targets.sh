#!/usr/bin/env bash
# The README's first command builds what it runs, not the test suite (issue: a first build of
# 17 minutes on a busy 2-core machine, most of it tests): its cmake line, configured afresh,
# leaves ninja's default target set with the executable and its modules and nothing of tests/;
# scripts/test.sh turns the tests on, and then they are built.
source "$(dirname "$0")/lib.sh"
command -v cmake >/dev/null && command -v ninja >/dev/null || fail "cmake and ninja are needed"

readme=$DBLOCK_SOURCE_DIR/README.md
first=$(grep -m1 -o 'cmake -S \. -B build[^&]*' "$readme")
check "the README's first command has a cmake line ($first)" test -n "$first"
read -ra args <<<"${first#cmake -S . -B build}"
dir=$E2E_TMP/build
cmake -S "$DBLOCK_SOURCE_DIR" -B "$dir" "${args[@]}" >"$E2E_TMP/cmake.log" 2>&1
assert_eq "the README's cmake line configures" 0 $?
# What `ninja -C build` runs: the commands of the default targets (a dry run stops at the
# glob check that CONFIGURE_DEPENDS adds).
ninja -C "$dir" -t commands >"$E2E_TMP/plan" 2>&1
assert_eq "ninja's plan" 0 $?
check "it links dblock" grep -q -- " -o dblock " "$E2E_TMP/plan"
check "and the modules it loads" grep -q -- " -o dblock-postgres.so " "$E2E_TMP/plan"
check "nothing of tests/ ($(grep -c 'tests/' "$E2E_TMP/plan") of $(wc -l <"$E2E_TMP/plan") commands)" \
  bash -c '! grep -q "tests/" "$1"' _ "$E2E_TMP/plan"

# scripts/test.sh configures with the tests on (its own cmake line), and they are built.
line=$(grep -m1 '^cmake -S \. -B "\$build"' "$DBLOCK_SOURCE_DIR/scripts/test.sh")
check "scripts/test.sh turns the tests on ($line)" grep -q -- "-DDBLOCK_BUILD_TESTS=ON" <<<"$line"
cmake -S "$DBLOCK_SOURCE_DIR" -B "$dir" -DDBLOCK_BUILD_TESTS=ON >>"$E2E_TMP/cmake.log" 2>&1
ninja -C "$dir" -t commands >"$E2E_TMP/plan" 2>&1
check "with them on, the plan builds the test programs" grep -q -- " -o tests/dblock_unit_tests " "$E2E_TMP/plan"
finish

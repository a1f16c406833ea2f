#include "support/test_env.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>

#include "backends/registry.hpp"

namespace dblock::test {
namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

std::string random_suffix() {
  static std::mt19937_64 rng{std::random_device{}() ^ static_cast<std::uint64_t>(getpid())};
  static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string out;
  for (int i = 0; i < 8; ++i) out += alphabet[rng() % (sizeof(alphabet) - 1)];
  return out;
}

}  // namespace

std::string backend_name() { return env_or("DBLOCK_TEST_BACKEND", "sqlite"); }

Strategy strategy() {
  auto s = parse_strategy(env_or("DBLOCK_TEST_STRATEGY", "lease"));
  if (!s) throw std::runtime_error("DBLOCK_TEST_STRATEGY is not a strategy");
  return *s;
}

std::string dsn() {
  const std::string backend = backend_name();
  if (backend == "sqlite") {
    static std::string path = [] {
      std::string dir = env_or("TMPDIR", "/tmp") + "/dblock-conformance-XXXXXX";
      if (!mkdtemp(dir.data())) throw std::runtime_error("mkdtemp failed");
      return dir + "/test.db";
    }();
    return "sqlite:" + path;
  }
  const char* var = backend == "mysql" ? "DBLOCK_TEST_MYSQL_DSN" : "DBLOCK_TEST_POSTGRES_DSN";
  std::string value = env_or(var, "");
  if (value.empty()) {
    bool ci = env_or("CI", "") == "true";
    std::fprintf(stderr, "%s is not set: no %s server to test against%s\n", var, backend.c_str(),
                 ci ? " (CI=true: this is a failure)" : " (skipped; scripts/test.sh starts one)");
    std::exit(ci ? 1 : 77);
  }
  return value;
}

std::string unique_prefix() { return "t" + random_suffix() + "_"; }

std::string unique_key(const std::string& stem) { return stem + "-" + random_suffix(); }

std::unique_ptr<Backend> open(const BackendOptions& options) {
  auto parsed = parse_dsn(dsn());
  if (!parsed) throw std::runtime_error(parsed.error().message);
  auto backend = open_backend(*parsed, options);
  if (!backend) throw std::runtime_error(backend.error().message);
  return std::move(*backend);
}

}  // namespace dblock::test

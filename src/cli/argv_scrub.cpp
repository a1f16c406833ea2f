#include "cli/argv_scrub.hpp"

#include <cstring>
#include <string_view>

#include "backends/common/dsn.hpp"

namespace dblock::cli {

bool scrub_passwords_from_argv(int argc, char** argv) {
  bool scrubbed = false;
  for (int i = 1; i < argc; ++i) {
    // The same ranges that redact every message: what a message hides, ps hides too.
    for (const auto& [begin, end] : password_ranges(argv[i])) {
      if (std::string_view(argv[i] + begin, end - begin).find_first_not_of('*') == std::string_view::npos) continue;
      std::memset(argv[i] + begin, '*', end - begin);
      scrubbed = true;
    }
  }
  return scrubbed;
}

}  // namespace dblock::cli

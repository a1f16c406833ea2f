#include "cli/argv_scrub.hpp"

#include <cstring>
#include <string>

#include "core/dsn.hpp"

namespace dblock::cli {

bool scrub_passwords_from_argv(int argc, char** argv) {
  bool scrubbed = false;
  for (int i = 1; i < argc; ++i) {
    std::string original = argv[i];
    std::string redacted = redact_dsn(original);
    if (redacted == original) continue;
    // The password is what lies between the common prefix and the common suffix.
    std::size_t prefix = 0;
    while (prefix < original.size() && prefix < redacted.size() && original[prefix] == redacted[prefix]) ++prefix;
    std::size_t suffix = 0;
    while (suffix < original.size() - prefix && suffix < redacted.size() - prefix &&
           original[original.size() - 1 - suffix] == redacted[redacted.size() - 1 - suffix])
      ++suffix;
    std::size_t length = original.size() - prefix - suffix;
    if (original.find_first_not_of('*', prefix) >= prefix + length) continue;  // already scrubbed
    std::memset(argv[i] + prefix, '*', length);
    scrubbed = true;
  }
  return scrubbed;
}

}  // namespace dblock::cli

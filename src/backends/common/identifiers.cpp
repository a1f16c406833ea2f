#include "backends/common/identifiers.hpp"

namespace dblock {

std::string quote_identifier(std::string_view name, char quote) {
  std::string out(1, quote);
  for (char c : name) {
    out += c;
    if (c == quote) out += quote;
  }
  out += quote;
  return out;
}

}  // namespace dblock

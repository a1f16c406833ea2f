#include "cli/output.hpp"

#include <ctime>
#include <iostream>

namespace dblock::cli {
namespace {

// Display width: count UTF-8 lead bytes, not continuation bytes, so non-ASCII keys align.
std::size_t display_width(const std::string& text) {
  std::size_t width = 0;
  for (unsigned char c : text)
    if ((c & 0xC0) != 0x80) ++width;
  return width;
}

}  // namespace

std::string format_timestamp(std::optional<std::int64_t> epoch_ms) {
  if (!epoch_ms) return "-";
  std::time_t seconds = static_cast<std::time_t>(*epoch_ms / 1000);
  int millis = static_cast<int>(*epoch_ms % 1000);
  if (millis < 0) {
    millis += 1000;
    --seconds;
  }
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, millis);
  return out;
}

nlohmann::json json_timestamp(std::optional<std::int64_t> epoch_ms) {
  if (!epoch_ms) return nullptr;
  return format_timestamp(epoch_ms);
}

void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths(header.size());
  for (std::size_t i = 0; i < header.size(); ++i) widths[i] = display_width(header[i]);
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i)
      widths[i] = std::max(widths[i], display_width(row[i]));
  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - display_width(row[i]) + 2, ' ');
    }
    std::cout << line << '\n';
  };
  print_row(header);
  for (const auto& row : rows) print_row(row);
  std::cout.flush();
}

}  // namespace dblock::cli

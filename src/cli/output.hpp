#pragma once
// Shared by status and history: timestamps, aligned tables for people, JSON for programs.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace dblock::cli {

/// "2026-11-22T04:30:00.123Z" (UTC, ms), or "-" when absent.
std::string format_timestamp(std::optional<std::int64_t> epoch_ms);
/// The same for JSON: a string, or null.
nlohmann::json json_timestamp(std::optional<std::int64_t> epoch_ms);

/// Prints rows under a header with columns padded to their widest cell (UTF-8 aware).
void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

}  // namespace dblock::cli

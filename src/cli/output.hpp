#pragma once
// Shared by status and history: timestamps, tables for people (libsmartcols, as lsblk and
// findmnt print theirs: -o COLUMNS, --raw, -n), JSON for programs.

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dblock::cli {

/// "2026-11-22T04:30:00.123Z" (UTC, ms), or "-" when absent.
std::string format_timestamp(std::optional<std::int64_t> epoch_ms);
/// The same for JSON: a string, or null.
nlohmann::json json_timestamp(std::optional<std::int64_t> epoch_ms);

/// Prints a JSON document on stdout, indented. Strings from the lock table that are not UTF-8
/// (anyone who can write the table can store them) come out with U+FFFD, not as an error.
void print_json(const nlohmann::json& doc);

/// One column a table command can show (-o NAME); the names are listed in dblock(1).
struct ColumnSpec {
  std::string_view name;
  std::string_view help;
  bool shown_by_default = true;
  bool right = false;  // numbers line up on the right
};

/// The util-linux table options of one command.
struct TableOptions {
  std::vector<std::string> columns;  // -o, as given (a list may also be comma separated)
  bool raw = false;
  bool noheadings = false;
};

/// Adds -o/--output COLUMNS (checked against `columns` at parse time), --raw and -n/--noheadings.
void add_table_options(CLI::App& sub, TableOptions& options, std::span<const ColumnSpec> columns);

/// Prints rows (one cell per entry of `columns`, in that order) as the options ask: the columns
/// of -o in its order, else those shown by default; aligned by display width, or --raw.
void print_table(std::span<const ColumnSpec> columns, const TableOptions& options,
                 const std::vector<std::vector<std::string>>& rows);

}  // namespace dblock::cli

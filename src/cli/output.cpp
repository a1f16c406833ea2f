#include "cli/output.hpp"

#include <dlfcn.h>
#include <langinfo.h>
#include <libsmartcols.h>

#include <clocale>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <memory>
#include <string_view>

#include "core/error.hpp"

namespace dblock::cli {
namespace {

// libsmartcols is loaded when a table is printed, not linked: every `dblock run` would pay for
// loading and binding one more library (scripts/bench.sh, startup, measures it). The header gives the signatures; the soname is util-linux's stable one.
struct Smartcols {
  decltype(&scols_new_table) new_table;
  decltype(&scols_unref_table) unref_table;
  decltype(&scols_table_enable_raw) enable_raw;
  decltype(&scols_table_enable_noheadings) enable_noheadings;
  decltype(&scols_table_new_column) new_column;
  decltype(&scols_table_new_line) new_line;
  decltype(&scols_line_set_data) set_data;
  decltype(&scols_print_table) print_table;
};

template <class F>
void bind(void* handle, F& function, const char* name) {
  function = reinterpret_cast<F>(::dlsym(handle, name));
  if (!function) throw FatalError{{ErrorKind::config, std::string("libsmartcols.so.1 has no ") + name}};
}

const Smartcols& smartcols() {
  static const Smartcols loaded = [] {
    // Never closed: the functions are used until exit.
    void* handle = ::dlopen("libsmartcols.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      throw FatalError{{ErrorKind::config, "status and history tables need libsmartcols.so.1 (Debian package "
                                           "libsmartcols1); --json works without it"}};
    Smartcols s{};
    bind(handle, s.new_table, "scols_new_table");
    bind(handle, s.unref_table, "scols_unref_table");
    bind(handle, s.enable_raw, "scols_table_enable_raw");
    bind(handle, s.enable_noheadings, "scols_table_enable_noheadings");
    bind(handle, s.new_column, "scols_table_new_column");
    bind(handle, s.new_line, "scols_table_new_line");
    bind(handle, s.set_data, "scols_line_set_data");
    bind(handle, s.print_table, "scols_print_table");
    return s;
  }();
  return loaded;
}

struct TableUnref {
  void operator()(libscols_table* table) const { smartcols().unref_table(table); }
};
using TablePtr = std::unique_ptr<libscols_table, TableUnref>;

std::vector<std::string> split_columns(const std::vector<std::string>& given) {
  std::vector<std::string> names;
  for (const auto& item : given) {
    std::string_view rest = item;
    while (!rest.empty()) {
      auto comma = rest.find(',');
      auto name = rest.substr(0, comma);
      if (!name.empty()) names.emplace_back(name);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return names;
}

std::optional<std::size_t> column_index(std::span<const ColumnSpec> columns, std::string_view name) {
  for (std::size_t i = 0; i < columns.size(); ++i) {
    const auto& known = columns[i].name;
    if (known.size() == name.size() &&
        std::equal(known.begin(), known.end(), name.begin(), [](char a, char b) { return a == std::toupper(static_cast<unsigned char>(b)); }))
      return i;
  }
  return std::nullopt;
}

std::string column_list(std::span<const ColumnSpec> columns) {
  std::string list;
  for (const auto& column : columns) {
    if (!list.empty()) list += ", ";
    list += column.name;
  }
  return list;
}

// libsmartcols measures cells with the C library's multibyte functions, which need a UTF-8
// LC_CTYPE; keys are UTF-8 whatever the environment says, so C/POSIX falls back to C.UTF-8.
void use_utf8_ctype() {
  std::setlocale(LC_CTYPE, "");
  std::string_view codeset = nl_langinfo(CODESET);
  if (codeset != "UTF-8") std::setlocale(LC_CTYPE, "C.UTF-8");
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

void print_json(const nlohmann::json& doc) {
  std::cout << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
}

void add_table_options(CLI::App& sub, TableOptions& options, std::span<const ColumnSpec> columns) {
  sub.add_option("-o,--output", options.columns, "Columns to show, comma separated: " + column_list(columns))
      ->type_name("COLUMNS")
      // One word per -o, as in util-linux: `-o KEY,STATE nightly` must leave the key alone.
      ->allow_extra_args(false)
      ->check([columns](const std::string& value) {
        for (const auto& name : split_columns({value}))
          if (!column_index(columns, name)) return "unknown column '" + name + "' (columns: " + column_list(columns) + ")";
        return std::string();
      });
  sub.add_flag("--raw", options.raw, "Raw output: one space between cells, unsafe characters as \\x<hex>");
  sub.add_flag("-n,--noheadings", options.noheadings, "Do not print the header line");
}

void print_table(std::span<const ColumnSpec> columns, const TableOptions& options,
                 const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> shown;
  for (const auto& name : split_columns(options.columns)) shown.push_back(*column_index(columns, name));
  if (shown.empty())
    for (std::size_t i = 0; i < columns.size(); ++i)
      if (columns[i].shown_by_default) shown.push_back(i);

  // libsmartcols prints nothing at all for a table without lines; the header alone says the
  // answer is "none" (a key that never ran), not that the command failed to print.
  if (rows.empty()) {
    if (options.noheadings) return;
    std::string header;
    for (std::size_t index : shown) header += (header.empty() ? "" : " ") + std::string(columns[index].name);
    std::cout << header << '\n' << std::flush;
    return;
  }

  use_utf8_ctype();
  const Smartcols& scols = smartcols();
  TablePtr table(scols.new_table());
  if (!table) throw FatalError{{ErrorKind::internal, "out of memory"}};
  scols.enable_raw(table.get(), options.raw);
  scols.enable_noheadings(table.get(), options.noheadings);
  for (std::size_t index : shown) {
    std::string name(columns[index].name);
    int flags = columns[index].right ? SCOLS_FL_RIGHT : 0;
    if (!scols.new_column(table.get(), name.c_str(), 0, flags))
      throw FatalError{{ErrorKind::internal, "out of memory"}};
  }
  for (const auto& row : rows) {
    libscols_line* line = scols.new_line(table.get(), nullptr);
    if (!line) throw FatalError{{ErrorKind::internal, "out of memory"}};
    for (std::size_t cell = 0; cell < shown.size(); ++cell)
      if (scols.set_data(line, cell, row.at(shown[cell]).c_str()) != 0)
        throw FatalError{{ErrorKind::internal, "out of memory"}};
  }
  std::cout.flush();  // libsmartcols writes to stdout through stdio
  scols.print_table(table.get());
  std::fflush(stdout);
}

}  // namespace dblock::cli

// dblock init: create the tables.  dblock schema [--dialect D]: print their DDL for a DBA;
// with --statements, every statement dblock runs there instead, one clause per line.

#include <iostream>
#include <string>
#include <vector>

#include "backends/registry.hpp"
#include "cli/commands.hpp"
#include "core/exit_code.hpp"
#include "core/key.hpp"
#include "core/sql/statement_catalog.hpp"

namespace dblock::cli {

CommandAction define_init(CLI::App&) {
  return [](Context& context) -> int {
    auto backend = context.open();
    if (!context.options.quiet)
      std::cout << "tables " << context.options.table_prefix << "locks and " << context.options.table_prefix
                << "runs" << (context.options.table_format == "shedlock" ? " (and ShedLock's " + context.options.table + ")" : "")
                << " are ready in " << context.dsn().redacted << std::endl;
    return exit_ok;
  };
}

CommandAction define_schema(CLI::App& sub) {
  auto dialect = std::make_shared<std::string>();
  // The dialects are the registry's backends, named in its order ("sqlite, mysql or postgres").
  std::vector<std::string> names;
  std::string listed;
  for (const KnownBackend& known : known_backends()) {
    if (!names.empty()) listed += names.size() + 1 == known_backends().size() ? " or " : ", ";
    names.emplace_back(known.name);
    listed += known.name;
  }
  sub.add_option("--dialect", *dialect, listed + " (default: the DSN's)")->check(CLI::IsMember(names));
  auto statements = std::make_shared<bool>(false);
  sub.add_flag("--statements", *statements, "Print every statement dblock runs there, named, instead of the DDL");
  return [dialect, statements](Context& context) -> int {
    std::string name = dialect->empty() ? context.dsn().backend : *dialect;
    value_or_throw(validate_table_prefix(context.options.table_prefix));
    const BackendEntry* entry = value_or_throw(load_backend(name));
    if (*statements) {
      std::cout << "-- Every statement dblock runs on " << name << " (table prefix " << context.options.table_prefix
                << "), named as\n-- its errors and logs name it. :name is a bound parameter.\n";
      for (const sql::Statement& st : entry->statements(context.backend_options()))
        std::cout << "\n-- " << st.id << "\n" << sql::format_sql(st.text) << ";\n";
      std::cout << std::flush;
      return exit_ok;
    }
    // --table-format shedlock: ShedLock's own table too, with its documented DDL.
    std::cout << entry->schema_sql(context.backend_options()) << std::flush;
    return exit_ok;
  };
}

}  // namespace dblock::cli

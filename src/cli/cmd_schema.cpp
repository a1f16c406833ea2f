// dblock init: create the tables.  dblock schema [--dialect D]: print their DDL for a DBA.

#include <iostream>

#include "backends/common/identifiers.hpp"
#include "backends/common/shedlock.hpp"
#include "backends/registry.hpp"
#include "cli/commands.hpp"
#include "core/exit_code.hpp"
#include "core/key.hpp"

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
  sub.add_option("--dialect", *dialect, "sqlite, mysql or postgres (default: the DSN's)")
      ->check(CLI::IsMember({"sqlite", "mysql", "postgres"}));
  return [dialect](Context& context) -> int {
    std::string name = dialect->empty() ? context.dsn().backend : *dialect;
    value_or_throw(validate_table_prefix(context.options.table_prefix));
    const BackendEntry* entry = value_or_throw(load_backend(name));
    std::cout << entry->schema_sql(context.options.table_prefix);
    // --table-format shedlock: ShedLock's own table too, with its documented DDL.
    if (context.backend_options().shedlock)
      std::cout << shedlock::ddl(name, quote_identifier(context.options.table, name == "mysql" ? '`' : '"')) << ";\n";
    std::cout.flush();
    return exit_ok;
  };
}

}  // namespace dblock::cli

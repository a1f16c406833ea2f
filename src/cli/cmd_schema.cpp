// dblock init: create the tables.  dblock schema [--dialect D]: print their DDL for a DBA.

#include <iostream>
#include <string>
#include <vector>

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
  // The dialects are the registry's backends, named in its order ("sqlite, mysql or postgres").
  std::vector<std::string> names;
  std::string listed;
  for (const KnownBackend& known : known_backends()) {
    if (!names.empty()) listed += names.size() + 1 == known_backends().size() ? " or " : ", ";
    names.emplace_back(known.name);
    listed += known.name;
  }
  sub.add_option("--dialect", *dialect, listed + " (default: the DSN's)")->check(CLI::IsMember(names));
  return [dialect](Context& context) -> int {
    std::string name = dialect->empty() ? context.dsn().backend : *dialect;
    value_or_throw(validate_table_prefix(context.options.table_prefix));
    const BackendEntry* entry = value_or_throw(load_backend(name));
    // --table-format shedlock: ShedLock's own table too, with its documented DDL.
    std::cout << entry->schema_sql(context.backend_options()) << std::flush;
    return exit_ok;
  };
}

}  // namespace dblock::cli

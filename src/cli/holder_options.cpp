#include "cli/holder_options.hpp"

#include <limits>

#include "cli/commands.hpp"
#include "cli/semaphore_view.hpp"
#include "core/semaphore.hpp"
#include "core/sql/lock_rows.hpp"

namespace dblock::cli {

void add_holder_options(CLI::App& sub, HolderArgs& args, bool allow_force) {
  args.owner_option = add_owner(sub, args.owner, "The holder identity given to acquire");
  args.token_option = sub.add_option("--token", args.token, "The fencing token acquire printed")
                          ->check(whole_number(1, std::numeric_limits<std::int64_t>::max(), "fencing token"));
  args.allow_force = allow_force;
  if (allow_force) {
    auto* force = sub.add_flag("--force", args.force, "Release whoever holds it");
    force->excludes(args.owner_option)->excludes(args.token_option);
  }
}

HolderSelector holder_selector(const HolderArgs& args) {
  if (!args.owner_option->count() && !args.token_option->count() && !args.force)
    throw FatalError{{ErrorKind::usage, "say whose lock: --owner ID or --token N" +
                                            std::string(args.allow_force ? " (or --force)" : "")}};
  HolderSelector who;
  if (args.owner_option->count()) who.owner = args.owner;
  if (args.token_option->count()) who.token = args.token;
  who.force = args.force;
  return who;
}

std::vector<std::string> holder_rows(Backend& backend, const std::string& key, const HolderSelector& who) {
  const auto slots = read_slots(backend, key);
  if (slots.empty()) return {key};
  std::vector<std::string> rows;
  for (const auto& [slot, lock] : slots) {
    if (lock.state != LockStatus::State::held) continue;
    if (who.owner && lock.owner != *who.owner) continue;
    if (who.token && lock.token != *who.token) continue;
    rows.push_back(slot_row_name(key, slot));
  }
  if (rows.empty())
    throw FatalError{{ErrorKind::lost, "no slot of the semaphore '" + key + "' is held by " + rows::describe(who)}};
  return rows;
}

void require_lease(Context& context, std::string_view command) {
  if (context.strategy() != Strategy::lease)
    throw FatalError{{ErrorKind::config, std::string(command) + " works only with the lease strategy: the " +
                                             context.options.strategy +
                                             " strategy's lock lives in a database session and would die with this process; "
                                             "use 'dblock run' for session strategies"}};
}

}  // namespace dblock::cli

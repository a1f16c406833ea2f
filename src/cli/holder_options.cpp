#include "cli/holder_options.hpp"

#include <algorithm>
#include <limits>

#include "cli/commands.hpp"
#include "cli/semaphore_view.hpp"
#include "core/acquire_loop.hpp"
#include "core/duration.hpp"
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

LostExplained explain_lost(Backend& backend, const std::string& key, const HolderSelector& who,
                           std::string_view command, Error lost) {
  if (lost.kind != ErrorKind::lost || who.force || (!who.owner && !who.token)) return {lost};
  const std::string keys[] = {key};
  auto read = backend.status(keys);
  if (!read || read->empty()) return {lost};
  const LockStatus& row = read->front();
  const bool same = (!who.token || row.token == *who.token) && (!who.owner || row.owner == *who.owner);
  const std::string holder = rows::describe(who);
  auto when = [&row](std::int64_t ms) {
    return format_utc_ms(ms) + " (" + format_duration(Millis(std::max<std::int64_t>(row.db_now_ms - ms, 0))) + " ago)";
  };
  // The row keeps the last holder and when it was released, not who released it: a release by
  // the holder itself and `release --force` write the same columns.
  if (same && row.state != LockStatus::State::held && row.released_at_ms) {
    lost.message = "the lock " + key + " was released at " + when(*row.released_at_ms) + " while " + holder +
                   " held it, not by this command: by `dblock release --force` or an earlier release of " + holder +
                   " (the row records neither which nor who ran it); " + holder + " holds it no more";
    return {lost, LostHow::released};
  }
  if (same && row.state == LockStatus::State::expired && row.expires_at_ms) {
    lost.message = "the lease of " + holder + " on " + key + " expired at " + when(*row.expires_at_ms) +
                   ", before this " + std::string(command) + "; " + holder + " holds it no more";
    return {lost, LostHow::expired};
  }
  if (who.token && row.token > *who.token && row.acquired_at_ms) {
    lost.message = "the lock " + key + " is not held by " + holder + ": token " + std::to_string(row.token) + " (" +
                   row.owner + ") took it at " + when(*row.acquired_at_ms) +
                   (row.state == LockStatus::State::held ? "" : " and has let it go since");
    return {lost, LostHow::taken};
  }
  return {lost};
}

void require_lease(Context& context, std::string_view command) {
  if (context.strategy() != Strategy::lease)
    throw FatalError{{ErrorKind::config, std::string(command) + " works only with the lease strategy: the " +
                                             context.options.strategy +
                                             " strategy's lock lives in a database session and would die with this process; "
                                             "use 'dblock run' for session strategies"}};
}

}  // namespace dblock::cli

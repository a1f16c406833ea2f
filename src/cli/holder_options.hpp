#pragma once
// --owner / --token / --force, shared by renew and release.

#include <CLI/CLI.hpp>

#include "cli/context.hpp"
#include "core/backend.hpp"
#include "core/lock_types.hpp"

namespace dblock::cli {

struct HolderArgs {
  std::string owner;
  std::int64_t token = 0;
  bool force = false;
  bool allow_force = false;
  CLI::Option* owner_option = nullptr;
  CLI::Option* token_option = nullptr;
};

/// Adds --owner and --token (and --force when allowed); at least one is required.
void add_holder_options(CLI::App& sub, HolderArgs& args, bool allow_force);
/// The selector for Backend::renew / Backend::release.
HolderSelector holder_selector(const HolderArgs& args);
/// The rows renew/release act on: the key itself, or for a semaphore (--slots) the slot rows
/// held by the selected holder (every held slot with --force). ErrorKind::lost when no slot is.
std::vector<std::string> holder_rows(Backend& backend, const std::string& key, const HolderSelector& who);
/// What the key's row says became of a holder's lock.
enum class LostHow { unknown, released, expired, taken };
struct LostExplained {
  Error error;
  LostHow how = LostHow::unknown;
};
/// `lost` (`command`, renew or release, found the lock no longer the holder's) with what the key's
/// row says happened: released by another command (`release --force`) and when, the lease expired
/// and when, or taken since by a later token. Any other error, or an unreadable row, as it is.
LostExplained explain_lost(Backend& backend, const std::string& key, const HolderSelector& who,
                           std::string_view command, Error lost);
/// acquire/renew/release refuse session strategies: their lock dies with the process.
void require_lease(Context& context, std::string_view command);

}  // namespace dblock::cli

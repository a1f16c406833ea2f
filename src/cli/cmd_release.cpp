// dblock release KEY (--owner ID | --token N | --force)

#include "cli/commands.hpp"
#include "cli/holder_options.hpp"
#include "core/exit_code.hpp"
#include "core/key.hpp"
#include "core/log.hpp"

namespace dblock::cli {
namespace {

struct ReleaseArgs {
  std::string key;
  HolderArgs holder;
};

}  // namespace

CommandAction define_release(CLI::App& sub) {
  auto args = std::make_shared<ReleaseArgs>();
  add_key(sub, args->key);
  add_holder_options(sub, args->holder, true);
  return [args](Context& context) -> int {
    // --force also clears a lease another strategy's row left behind, so only acquire/renew insist on lease.
    if (!args->holder.force) require_lease(context, "release");
    HolderSelector who = holder_selector(args->holder);
    auto backend = context.open();
    for (const auto& row : holder_rows(*backend, args->key, who))
      if (auto released = backend->release(row, who); !released) {
        auto lost = explain_lost(*backend, row, who, "release", released.error());
        // Released by another command and not taken since: nothing is left to release, and the
        // holder's renew has said so already where there was one (the README's shell pattern:
        // renew fails, its EXIT trap releases). Exit 76 without saying it twice; -v says it.
        if (lost.how == LostHow::released) {
          log::verbose(error_line(args->key, lost.error));
          return exit_code_for(lost.error.kind);
        }
        throw FatalError{lost.error};
      }
    log::verbose("released " + args->key);
    return exit_ok;
  };
}

}  // namespace dblock::cli

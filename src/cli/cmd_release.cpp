// dblock release KEY (--owner ID | --token N | --force)

#include "cli/commands.hpp"
#include "cli/holder_options.hpp"
#include "core/exit_code.hpp"
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
      if (auto released = backend->release(row, who); !released)
        throw FatalError{explain_lost(*backend, row, who, "release", released.error())};
    log::verbose("released " + args->key);
    return exit_ok;
  };
}

}  // namespace dblock::cli

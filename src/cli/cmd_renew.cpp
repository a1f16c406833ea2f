// dblock renew KEY [--ttl D] (--owner ID | --token N)

#include "cli/commands.hpp"
#include "cli/holder_options.hpp"
#include "core/duration.hpp"
#include "core/exit_code.hpp"
#include "core/log.hpp"

namespace dblock::cli {
namespace {

struct RenewArgs {
  std::string key;
  std::string ttl = "30s";
  HolderArgs holder;
};

}  // namespace

CommandAction define_renew(CLI::App& sub) {
  auto args = std::make_shared<RenewArgs>();
  add_key(sub, args->key);
  add_duration(sub, "--ttl", args->ttl, "New lease length from now")->capture_default_str();
  add_holder_options(sub, args->holder, false);
  return [args](Context& context) -> int {
    require_lease(context, "renew");
    HolderSelector who = holder_selector(args->holder);
    Millis ttl = duration_option("--ttl", args->ttl);
    if (ttl < Millis(1000)) throw FatalError{{ErrorKind::usage, "--ttl must be at least 1s"}};
    auto backend = context.open(ttl);
    for (const auto& row : holder_rows(*backend, args->key, who))
      if (auto renewed = backend->renew(row, who, ttl); !renewed)
        throw FatalError{explain_lost(*backend, row, who, "renew", renewed.error()).error};
    log::verbose("renewed " + args->key + " for " + format_duration(ttl));
    return exit_ok;
  };
}

}  // namespace dblock::cli

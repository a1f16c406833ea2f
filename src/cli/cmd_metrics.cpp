// dblock metrics [KEY...] [--output FILE]: the Prometheus text exposition format, for
// node_exporter's textfile collector (dblock metrics --output dir/dblock.prom). Samples of one
// metric stand together under their HELP and TYPE lines, as the format asks.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/run_summary.hpp"
#include "core/child_process.hpp"
#include "core/exit_code.hpp"
#include "core/key.hpp"

namespace dblock::cli {
namespace {

struct MetricsArgs {
  std::vector<std::string> keys;
  std::string output;
};

// Writes `text` to `path` the way the textfile collector needs: into a temporary file in the
// same directory (a name not ending in .prom, which the collector ignores), flushed to disk,
// then renamed over `path`. A reader sees the old file or the new one, never a part of either.
// Mode as a newly created file's (0666 less the umask): the collector runs as another user.
void write_atomically(const std::string& path, const std::string& text) {
  std::string temporary = path + ".XXXXXX";
  auto fail = [&](const std::string& what) {
    const int err = errno;
    throw FatalError{{ErrorKind::config, "cannot write " + path + ": " + what + ": " + std::strerror(err)}};
  };
  UniqueFd fd(::mkstemp(temporary.data()));
  if (fd.get() < 0) fail("creating a temporary file in its directory");
  // Every way out but the rename removes the temporary file.
  struct RemoveUnlessRenamed {
    const std::string* name;
    ~RemoveUnlessRenamed() {
      if (name) ::unlink(name->c_str());
    }
  } remove_unless_renamed{&temporary};
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd.get(), 0666 & ~mask) != 0) fail("fchmod");
  for (std::size_t done = 0; done < text.size();) {
    ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write");
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd.get()) != 0) fail("fsync");
  if (::rename(temporary.c_str(), path.c_str()) != 0) fail("rename");
  remove_unless_renamed.name = nullptr;
}

// A label value: backslash, double quote and line feed escaped, as the format asks.
std::string label_value(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string epoch_seconds(std::int64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ms) / 1000.0);
  return buf;
}

using Sample = std::function<std::optional<std::string>(const KeySummary&)>;

void family(std::string& out, const std::vector<KeySummary>& keys, const std::string& name, const std::string& help,
            const Sample& sample) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n";
  for (const auto& key : keys)
    if (auto value = sample(key)) out += name + "{key=\"" + label_value(key.lock.key) + "\"} " + *value + "\n";
}

std::optional<std::string> timestamp(std::optional<std::int64_t> ms) {
  if (!ms) return std::nullopt;
  return epoch_seconds(*ms);
}

std::string exposition(const std::vector<KeySummary>& keys) {
  std::string out;
  family(out, keys, "dblock_lock_held", "1 when the lock is held now, else 0.",
         [](const KeySummary& k) { return std::string(k.lock.state == LockStatus::State::held ? "1" : "0"); });
  family(out, keys, "dblock_lock_holder_age_seconds", "How long the current holder has held the lock (0 when not held).",
         [](const KeySummary& k) {
           bool held = k.lock.state == LockStatus::State::held && k.lock.acquired_at_ms;
           return epoch_seconds(held ? std::max<std::int64_t>(0, k.lock.db_now_ms - *k.lock.acquired_at_ms) : 0);
         });
  family(out, keys, "dblock_lock_token", "The fencing token last issued for the key.",
         [](const KeySummary& k) { return std::to_string(k.lock.token); });
  family(out, keys, "dblock_last_start_timestamp_seconds", "When the last run started (database clock, Unix time).",
         [](const KeySummary& k) { return timestamp(k.lock.last_started_at_ms); });
  family(out, keys, "dblock_last_finish_timestamp_seconds", "When the last run finished (database clock, Unix time).",
         [](const KeySummary& k) { return timestamp(k.last_finished_ms); });
  family(out, keys, "dblock_last_success_timestamp_seconds",
         "When the last successful run finished (database clock, Unix time).",
         [](const KeySummary& k) { return timestamp(k.last_success_ms); });
  family(out, keys, "dblock_last_exit_code", "The exit status of the last finished run.", [](const KeySummary& k) {
    return k.last_exit_code ? std::optional(std::to_string(*k.last_exit_code)) : std::nullopt;
  });
  // A gauge, not a counter: pruning to --history-keep makes the count go down.
  std::string name = "dblock_runs";
  out += "# HELP " + name + " Runs in the retained history (the newest --history-keep per key), by outcome.\n";
  out += "# TYPE " + name + " gauge\n";
  for (const auto& key : keys)
    for (std::size_t i = 0; i < all_outcomes.size(); ++i)
      out += name + "{key=\"" + label_value(key.lock.key) + "\",outcome=\"" + std::string(to_string(all_outcomes[i])) +
             "\"} " + std::to_string(key.runs[i]) + "\n";
  return out;
}

}  // namespace

CommandAction define_metrics(CLI::App& sub) {
  auto args = std::make_shared<MetricsArgs>();
  sub.add_option("key", args->keys, "Only these keys (default: every lock)")->check([](const std::string& key) {
    auto ok = validate_key(key);
    return ok ? std::string() : ok.error().message;
  });
  sub.add_option("--output", args->output,
                 "Write to FILE, atomically (a temporary file renamed over it), instead of standard output")
      ->type_name("FILE");
  return [args](Context& context) -> int {
    // A sample may appear once: a key named twice is reported once.
    std::vector<std::string> keys;
    for (const auto& key : args->keys)
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    auto backend = context.open_for_inspection();
    // Nothing is written unless every query succeeded: a half-written file would be read as
    // the truth by the collector.
    std::string text = exposition(summarize(*backend, keys));
    if (!args->output.empty()) write_atomically(args->output, text);
    else std::cout << text << std::flush;
    return exit_ok;
  };
}

}  // namespace dblock::cli

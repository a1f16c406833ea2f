#pragma once

namespace dblock::cli {

/// Overwrites any DSN password in argv with '*' so `ps` stops showing it (dblock(1), DSN).
/// Returns true if there was one.
bool scrub_passwords_from_argv(int argc, char** argv);

}  // namespace dblock::cli

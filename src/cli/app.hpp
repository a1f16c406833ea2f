#pragma once

namespace dblock::cli {

/// Parses the command line, runs the subcommand and returns the process exit status.
/// Every exception and error ends here as one "dblock: " line and an exit code.
int main(int argc, char** argv);

}  // namespace dblock::cli

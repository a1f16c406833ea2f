#include <cstdio>

#include <unistd.h>

#include "cli/app.hpp"

int main(int argc, char** argv) {
  const int code = dblock::cli::main(argc, argv);
#if defined(__SANITIZE_ADDRESS__)
  return code;  // LeakSanitizer reports from the exit handlers skipped below
#else
  // Everything of ours is closed by now (connections said goodbye, files flushed and closed, the
  // command reaped). What a normal exit would still run are the libraries' exit handlers:
  // OpenSSL 3's cleanup, which libpq's authentication initialized, and the destructors of every
  // loaded library, 0.5-1 ms of CPU in a server run. Right after a release that time competes
  // with the next holder's start, so the process ends without them.
  std::fflush(nullptr);
  ::_exit(code);
#endif
}

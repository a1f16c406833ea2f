#include "cli/app.hpp"

#include "core/exit_code.hpp"

namespace dblock::cli {

int main(int, char**) { return exit_internal; }

}  // namespace dblock::cli

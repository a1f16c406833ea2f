#include "cli/app.hpp"

int main(int argc, char** argv) { return dblock::cli::main(argc, argv); }

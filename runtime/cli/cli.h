// The `zerolap` command line: parses arguments (CLI11), starts MPI, runs a subcommand on every
// rank and turns errors into exit codes: 0 success, 2 bad input, 1 runtime failure.
#pragma once

namespace zl {

int run_cli(int argc, char** argv);

}  // namespace zl

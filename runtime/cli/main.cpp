// The `zerolap` executable: everything lives in the runtime library; see runtime/cli/cli.cpp.
#include "runtime/cli/cli.h"

int main(int argc, char** argv) { return zl::run_cli(argc, argv); }

// The `zerolap` executable: everything lives in the runtime library; see runtime/cli/cli.cpp.
#include "runtime/cli/cli.h"
#include "runtime/cli/openmp_wait.h"

int main(int argc, char** argv) {
  zl::exec_with_openmp_wait_policy(argv);  // may replace the process; before MPI and any thread
  return zl::run_cli(argc, argv);
}

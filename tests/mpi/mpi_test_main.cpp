// Catch2 main for the MPI tests: initialises MPI (THREAD_MULTIPLE, as zerolap does) around the
// session. Run under mpirun; every rank runs the same test cases in the same order. A run that
// passed removes its temporary directories.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <mpi.h>

#include <cstdio>

#include "runtime/comm/world.h"
#include "tests/test_tmp.h"

int main(int argc, char** argv) {
  int provided = 0;
  zl::set_mpi_defaults();
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "MPI does not provide MPI_THREAD_MULTIPLE\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const int result = Catch::Session().run(argc, argv);
  // A failure on any rank fails the test on every rank: mpirun reports the first non-zero exit.
  int any_failed = 0;
  const int failed = result != 0 ? 1 : 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  // Every rank is done with the shared directories (named by rank 0's pid): each rank removes
  // those named by its own pid, and a failed run keeps them to look at (tests/test_tmp.h).
  if (any_failed == 0) zl::test::remove_own_tmp_dirs();
  MPI_Finalize();
  return any_failed ? 1 : 0;
}

// exec_with_openmp_wait_policy: zerolap's default OpenMP wait policy, set by re-executing itself.
#include "runtime/cli/openmp_wait.h"

#include <unistd.h>

#include <cstdlib>

namespace zl {

// Note [OpenMP wait policy]: the CPU GEMMs (oneDNN, built on GNU OpenMP) and zerolap's own CPU
// kernels run on one OpenMP team. By default libgomp's threads spin at the end of every parallel
// region for a long while (GOMP_SPINCOUNT, 300000 iterations) before they sleep. On a machine
// where other processes are busy, a spinning thread holds a core that the thread it waits for, or
// another process, needs, and a step takes many times longer than on one thread. Passive threads
// sleep at once and are woken by the next region: the step keeps its speed under load, and on an
// idle machine a wake-up costs microseconds per region (scripts/bench_threads_under_load.sh
// compares both, idle and loaded, beside runtime.threads = 1).
// libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once, when it is loaded, before main runs,
// and offers no call to change them later; so zerolap sets the variable and executes itself again
// with it. The exec comes before MPI_Init: the process keeps its pid, its open files and its
// environment, which is all an MPI launcher (mpirun's PMIx variables, Slurm's) has given it at
// that point; every rank does it for itself. A user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT wins:
// then nothing is set and nothing re-executed. The set variable also ends the recursion.
void exec_with_openmp_wait_policy(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (setenv(kOpenmpWaitVariable, kOpenmpWaitValue, /*overwrite=*/1) != 0) return;
  execv("/proc/self/exe", argv);
  // Only reached when the exec failed (no /proc): this process's OpenMP runtime has its default
  // policy, and the variable set above would misstate it to child processes.
  unsetenv(kOpenmpWaitVariable);
}

}  // namespace zl

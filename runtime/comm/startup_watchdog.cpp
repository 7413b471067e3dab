// StartupWatchdog (see startup_watchdog.h).
#include "runtime/comm/startup_watchdog.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace zl {

int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return std::atoi(v);
  }
  return -1;
}

StartupWatchdog::StartupWatchdog(double timeout_s) : timeout_s_(timeout_s) {
  if (timeout_s_ > 0) thread_ = std::thread([this] { watch(); });
}

void StartupWatchdog::done() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StartupWatchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s_));
  if (wake_.wait_until(lock, deadline, [this] { return done_; })) return;
  // Past the deadline, with the main thread inside MPI: nothing can be unwound. Say where, and
  // end the process; the launcher sees a rank fail and ends the job.
  // Either cause is possible: name both, and the key that set the deadline.
  const int rank = launcher_rank();
  char who[32] = "this process";
  if (rank >= 0) std::snprintf(who, sizeof who, "rank %d", rank);
  std::fprintf(stderr,
               "zerolap: error on %s: %s did not complete within runtime.timeout_s = %g s of "
               "start-up: a rank of the job stopped or died while it started, or start-up needs "
               "longer here (raise runtime.timeout_s); this rank exits (exit 1)\n",
               who, phase_.load(), timeout_s_);
  std::fflush(stderr);
  std::_Exit(1);
}

}  // namespace zl

// The start-up watchdog: from the process's start until its world is up (MPI_Init and the node
// grouping done), the waits inside MPI have no deadline of their own, so a rank that stopped or
// died during start-up would hang every other rank forever. A thread ends this process after
// runtime.timeout_s with a message naming the phase it was stuck in; mpirun then ends the job.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace zl {

class StartupWatchdog {
 public:
  // timeout_s <= 0: no watchdog.
  explicit StartupWatchdog(double timeout_s);
  ~StartupWatchdog() { done(); }
  StartupWatchdog(const StartupWatchdog&) = delete;
  StartupWatchdog& operator=(const StartupWatchdog&) = delete;

  // The phase the process is in now ("MPI_Init_thread ..."), named if the deadline passes. `phase`
  // must outlive the watchdog (a string literal).
  void phase(const char* phase) { phase_.store(phase); }
  // The world is up: stops the thread.
  void done();

 private:
  void watch();

  double timeout_s_;
  std::atomic<const char*> phase_{"start-up"};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;
};

// The rank the launcher gave this process, read from its environment before MPI_Init (Open MPI,
// PMIx, MPICH/PMI, Slurm's srun); -1 when started without a launcher.
int launcher_rank();

}  // namespace zl

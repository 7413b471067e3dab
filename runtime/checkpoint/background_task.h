// One piece of a checkpoint's file I/O run in the background while training goes on: with
// checkpoint.async a rank's shard write, then on rank 0 the checkpoint's publication (manifest,
// `latest`, pruning); after a sync sharded save, rank 0's pruning. At most one task runs at a time:
// start() requires the previous one waited for. A task does file I/O only (no MPI, no device), so
// it needs nothing from the training loop.
//
// Note [Checkpoint writes use idle CPU]: the task's thread runs under SCHED_IDLE, so the kernel
// gives it a core only when no training thread wants one. A write has until the next checkpoint
// step to finish (at most one is in flight), while a training thread it preempts delays its rank,
// and every rank waits for the slowest at the next collective. Measured on 2 ranks filling 2
// cores (configs/bench_overlap.toml, async sharded every 10 steps, 50 MB per checkpoint): the
// steps after a checkpoint took 34 ms more than others at normal priority, 23 ms under
// SCHED_IDLE, 11 ms of it the staging stop (docs/checkpoints.md, "What a checkpoint costs").
// Where training leaves no CPU idle (4 ranks on 2 cores, configs/bench_large.toml), an idle
// write barely moves, and the next checkpoint stopped training until it was done: 0.15-1.3 s
// against 0.1 s at normal priority. So the owner calls hurry() once the write has taken a quarter
// of the time between checkpoints (CheckpointSaver::poll; half was still too late there), and
// the rest of it takes a fair share; and when training waits for the task anyway.
// Lowering a thread's own priority and restoring it need no privilege; where either is refused
// the task runs at the priority it has.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <thread>

namespace zl {

class BackgroundTask {
 public:
  BackgroundTask() = default;
  // Waits for a task still running (a failed run leaves its checkpoint uncommitted: no manifest,
  // or no `latest`, names what it wrote).
  ~BackgroundTask();
  BackgroundTask(const BackgroundTask&) = delete;
  BackgroundTask& operator=(const BackgroundTask&) = delete;

  // Runs `task` on a thread of its own. Only when none is running (started and not waited for).
  void start(std::function<void()> task);
  bool running() const { return thread_.joinable(); }
  // Moves a running task from SCHED_IDLE to normal priority (Note [Checkpoint writes use idle
  // CPU]); a no-op when none runs or it was hurried already.
  void hurry();
  // Whether the task has ended, done or failed (never blocks).
  bool finished() const { return finished_.load(std::memory_order_acquire); }
  // Waits for the task, if one runs, and rethrows its failure.
  void wait();

 private:
  std::thread thread_;
  bool hurried_ = false;
  std::atomic<bool> finished_{false};
  std::exception_ptr error_;
};

}  // namespace zl

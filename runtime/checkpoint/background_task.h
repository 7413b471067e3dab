// One piece of a checkpoint's file I/O run in the background while training goes on
// (checkpoint.async): a rank's shard write, then on rank 0 the checkpoint's publication
// (manifest, `latest`, pruning). At most one task runs at a time: start() requires the previous
// one waited for. A task does file I/O only (no MPI, no device), so it needs nothing from the
// training loop.
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
  // Whether the task has ended, done or failed (never blocks).
  bool finished() const { return finished_.load(std::memory_order_acquire); }
  // Waits for the task, if one runs, and rethrows its failure.
  void wait();

 private:
  std::thread thread_;
  std::atomic<bool> finished_{false};
  std::exception_ptr error_;
};

}  // namespace zl

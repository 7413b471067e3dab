// A CPU stream: one worker thread that runs enqueued tasks strictly in FIFO order, the CPU
// analogue of a cudaStream_t. A task's Completion is signalled after the task *and every earlier
// task* finished. If a task throws, the stream is poisoned: that task and every later one complete
// with the same error without running (after a failed collective, issuing more could hang).
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace zl {

class Completion {
 public:
  void wait();  // blocks until signalled; rethrows the task's error
  bool is_done() {
    std::lock_guard lock(mutex_);
    return done_;
  }
  void signal(std::exception_ptr error);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

class CpuStream {
 public:
  CpuStream();
  ~CpuStream();  // runs what is queued, then joins the thread
  CpuStream(const CpuStream&) = delete;
  CpuStream& operator=(const CpuStream&) = delete;

  std::shared_ptr<Completion> enqueue(std::function<void()> task);
  // Waits for everything enqueued so far; rethrows a poisoned stream's error.
  void synchronize() { enqueue([] {})->wait(); }
  bool on_stream_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void run();

  struct Task {
    std::function<void()> fn;
    std::shared_ptr<Completion> done;
  };
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  std::exception_ptr poisoned_;
  std::thread thread_;  // last: it starts once the members above exist
};

}  // namespace zl

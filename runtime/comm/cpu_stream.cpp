// CpuStream: a FIFO task thread with per-task completions (see cpu_stream.h).
#include "runtime/comm/cpu_stream.h"

namespace zl {

void Completion::wait() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

void Completion::signal(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

CpuStream::CpuStream() : thread_([this] { run(); }) {}

CpuStream::~CpuStream() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::shared_ptr<Completion> CpuStream::enqueue(std::function<void()> task) {
  auto done = std::make_shared<Completion>();
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(Task{std::move(task), done});
  }
  cv_.notify_all();
  return done;
}

void CpuStream::run() {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    std::exception_ptr error = poisoned_;
    if (!error) {
      try {
        task.fn();
      } catch (...) {
        error = std::current_exception();
        poisoned_ = error;
      }
    }
    task.done->signal(error);
  }
}

}  // namespace zl

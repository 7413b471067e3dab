// The background task of a checkpoint (see background_task.h).
#include "runtime/checkpoint/background_task.h"

#include <pthread.h>
#include <sched.h>

#include <utility>

#include "base/errors.h"

namespace zl {

BackgroundTask::~BackgroundTask() {
  if (thread_.joinable()) thread_.join();
}

void BackgroundTask::start(std::function<void()> task) {
  ZL_CHECK(!running(), "a checkpoint task started while another one runs");
  finished_.store(false, std::memory_order_relaxed);
  hurried_ = false;
  error_ = nullptr;
  // error_ is written by the thread and read only after wait() joined it.
  thread_ = std::thread([this, task = std::move(task)] {
    try {
      task();
    } catch (...) {
      error_ = std::current_exception();
    }
    finished_.store(true, std::memory_order_release);
  });
  // Note [Checkpoint writes use idle CPU]; best effort. Set here, not by the thread itself, so
  // that a hurry() after start() returns is never undone.
  const sched_param idle{};
  pthread_setschedparam(thread_.native_handle(), SCHED_IDLE, &idle);
}

void BackgroundTask::hurry() {
  if (!running() || hurried_) return;
  hurried_ = true;
  const sched_param normal{};
  pthread_setschedparam(thread_.native_handle(), SCHED_OTHER, &normal);  // best effort
}

void BackgroundTask::wait() {
  if (!thread_.joinable()) return;
  thread_.join();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace zl

// LoopbackCommunicator: a one-rank Communicator for single-process tests of the step's parts.
// Operations run in issue order on a CpuStream of their own, as communicator.h says at one rank:
// the five collectives leave the buffer as it is, all_gather_from copies the shard into place.
// Each collective is logged (CollectiveLog, shared by a test's communicators) when issued and when
// it ran; hold() stops the stream until the returned Hold opens, to see what waits for what.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/errors.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/cpu_stream.h"

namespace zl::test {

// One collective as issued: the communicator's name, the op ("all_reduce", "reduce", "broadcast",
// "reduce_scatter", "all_gather", "all_gather_from", "all_reduce_f64"), elements, dtype, root
// (reduce / broadcast; -1 otherwise) and the buffer.
struct LoggedCollective {
  std::string comm;
  std::string op;
  std::int64_t n = 0;
  DType dtype = DType::F32;
  int root = -1;
  const void* buf = nullptr;
  bool done = false;  // it ran on its stream
};

// Thread-safe: collectives are issued from the main thread and from continuations.
class CollectiveLog {
 public:
  std::size_t issued(LoggedCollective c) {
    std::lock_guard lock(mutex_);
    entries_.push_back(std::move(c));
    return entries_.size() - 1;
  }
  void ran(std::size_t index) {
    std::lock_guard lock(mutex_);
    entries_[index].done = true;
    completed_.push_back(index);
  }
  // Every collective in issue order (across communicators: the order the calls were made).
  std::vector<LoggedCollective> entries() const {
    std::lock_guard lock(mutex_);
    return entries_;
  }
  // The issue-order indices of the collectives that ran, in the order they ran.
  std::vector<std::size_t> completion_order() const {
    std::lock_guard lock(mutex_);
    return completed_;
  }
  void clear() {
    std::lock_guard lock(mutex_);
    entries_.clear();
    completed_.clear();
  }

 private:
  mutable std::mutex mutex_;
  std::vector<LoggedCollective> entries_;
  std::vector<std::size_t> completed_;
};

// A task that blocks its stream until open() (or the destructor: a stream must drain).
class Hold {
 public:
  struct State {
    std::mutex mutex;
    std::condition_variable cv;
    bool open = false;
    bool reached = false;  // the stream got to the hold
  };
  explicit Hold(std::shared_ptr<State> state) : state_(std::move(state)) {}
  Hold(Hold&&) = default;
  Hold& operator=(Hold&&) = default;
  ~Hold() {
    if (state_) open();
  }
  void open() {
    {
      std::lock_guard lock(state_->mutex);
      state_->open = true;
    }
    state_->cv.notify_all();
  }
  // Blocks until the stream reached the hold (everything issued before it ran).
  void wait_reached() {
    std::unique_lock lock(state_->mutex);
    state_->cv.wait(lock, [&] { return state_->reached; });
  }

 private:
  std::shared_ptr<State> state_;
};

class LoopbackCommunicator final : public Communicator {
 public:
  LoopbackCommunicator(std::string name, CollectiveLog& log)
      : name_(std::move(name)), log_(log) {}
  ~LoopbackCommunicator() override = default;  // the stream drains: open every Hold before

  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string& name() const override { return name_; }

  using Communicator::all_reduce;
  using Communicator::broadcast;
  using Communicator::reduce;
  Work all_reduce(void* buf, std::int64_t n, DType dtype, ReduceOp op,
                  const ExecContext* = nullptr) override {
    check_reduce_op(dtype, op, name_);
    return record("all_reduce", buf, n, dtype, -1);
  }
  Work reduce(void* buf, std::int64_t n, DType dtype, int root, ReduceOp op,
              const ExecContext* = nullptr) override {
    check_reduce_op(dtype, op, name_);
    ZL_CHECK(root == 0, "loopback {}: reduce to rank {} of 1", name_, root);
    return record("reduce", buf, n, dtype, root);
  }
  Work broadcast(void* buf, std::int64_t n, DType dtype, int root,
                 const ExecContext* = nullptr) override {
    ZL_CHECK(root == 0, "loopback {}: broadcast from rank {} of 1", name_, root);
    return record("broadcast", buf, n, dtype, root);
  }
  Work reduce_scatter(void* buf, std::int64_t n, DType dtype, ReduceOp op,
                      const ExecContext* = nullptr) override {
    check_reduce_op(dtype, op, name_);
    shard_numel(n, 1, name_);
    return record("reduce_scatter", buf, n, dtype, -1);
  }
  Work all_gather(void* buf, std::int64_t n, DType dtype, const ExecContext* = nullptr) override {
    return record("all_gather", buf, n, dtype, -1);
  }
  Work all_gather_from(const void* shard, void* buf, std::int64_t n, DType dtype,
                       const ExecContext* = nullptr) override {
    const auto bytes = static_cast<std::size_t>(shard_numel(n, 1, name_) * dtype_size(dtype));
    return record("all_gather_from", buf, n, dtype, -1,
                  [shard, buf, bytes] { std::memcpy(buf, shard, bytes); });
  }
  Work all_reduce_f64(double* buf, std::int64_t n) override {
    return record("all_reduce_f64", buf, n, DType::F32, -1);
  }
  Work then(std::function<void(const ExecContext& stream)> fn) override {
    return work(stream_.enqueue([fn = std::move(fn), exec = exec()] { fn(exec); }));
  }
  Work no_op(const ExecContext* = nullptr) override { return work(stream_.enqueue([] {})); }
  void synchronize() override { stream_.synchronize(); }
  ExecContext exec() const override { return ExecContext{}; }

  CommStats stats() const override {
    std::lock_guard lock(stats_mutex_);
    return stats_;
  }
  void reset_stats() override {
    std::lock_guard lock(stats_mutex_);
    stats_ = CommStats{};
  }
  void set_tracer(Tracer*) override {}

  // Stops this stream after what was issued so far until the Hold opens (or is destroyed).
  Hold hold() {
    auto state = std::make_shared<Hold::State>();
    stream_.enqueue([state] {
      std::unique_lock lock(state->mutex);
      state->reached = true;
      state->cv.notify_all();
      state->cv.wait(lock, [&] { return state->open; });
    });
    return Hold(state);
  }

 private:
  // A Work over a stream task's completion; a wait longer than a test can take fails instead of
  // hanging the test binary (a test that waits for a collective it holds).
  struct LoopbackWork final : WorkImpl {
    explicit LoopbackWork(std::shared_ptr<Completion> done) : done_(std::move(done)) {}
    void wait() override {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!done_->is_done()) {
        if (std::chrono::steady_clock::now() > deadline) {
          throw RuntimeFailure("loopback: an operation did not complete in 60 s (held?)");
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      done_->wait();  // rethrows the task's error
    }
    bool is_done() override { return done_->is_done(); }
    std::shared_ptr<Completion> done_;
  };
  static Work work(std::shared_ptr<Completion> done) {
    return Work(std::make_shared<LoopbackWork>(std::move(done)));
  }

  template <class Task = void (*)()>
  Work record(const char* op, const void* buf, std::int64_t n, DType dtype, int root,
              Task task = [] {}) {
    {
      std::lock_guard lock(stats_mutex_);
      ++stats_.ops;
      stats_.payload_bytes += n * (std::string(op) == "all_reduce_f64" ? 8 : dtype_size(dtype));
    }
    const std::size_t index = log_.issued(LoggedCollective{
        .comm = name_, .op = op, .n = n, .dtype = dtype, .root = root, .buf = buf});
    CollectiveLog* log = &log_;
    return work(stream_.enqueue([log, index, task] {
      task();
      log->ran(index);
    }));
  }

  std::string name_;
  CollectiveLog& log_;
  mutable std::mutex stats_mutex_;
  CommStats stats_;
  CpuStream stream_;  // last: its thread stops before the members it uses go
};

}  // namespace zl::test

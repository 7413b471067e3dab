// The MPI backend of the communicator API: a dup of the parent communicator owned by one comm
// thread (a CpuStream). The thread issues each collective as a nonblocking MPI call and polls it
// to completion before starting the next, so operations complete strictly in issue order and a
// callback enqueued after an operation runs after it and everything before it. With
// CommPriority::Realtime the comm thread runs under SCHED_FIFO (Note [Comm thread priority]).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/comm/comm_options.h"
#include "runtime/comm/cpu_stream.h"

namespace zl {

// The most elements one MPI call moves per rank (its counts are ints): a collective of a bucket
// above it cannot run on the CPU (check_collective_counts, runtime/train/run/trainer_setup.cpp,
// refuses it up front).
inline constexpr std::int64_t kMaxMpiCount = std::numeric_limits<int>::max();

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates `parent`: a collective, so every rank constructs its communicators in one order.
  MpiCommunicator(MPI_Comm parent, std::string name, double timeout_s,
                  CommPriority priority = CommPriority::Normal);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }

  using Communicator::all_reduce;
  using Communicator::broadcast;
  using Communicator::reduce;
  Work all_reduce(void* buf, std::int64_t n, DType dtype, ReduceOp op,
                  const ExecContext* issuing_stream = nullptr) override;
  Work reduce(void* buf, std::int64_t n, DType dtype, int root, ReduceOp op,
              const ExecContext* issuing_stream = nullptr) override;
  Work broadcast(void* buf, std::int64_t n, DType dtype, int root,
                 const ExecContext* issuing_stream = nullptr) override;
  Work reduce_scatter(void* buf, std::int64_t n, DType dtype, ReduceOp op,
                      const ExecContext* issuing_stream = nullptr) override;
  Work all_gather(void* buf, std::int64_t n, DType dtype,
                  const ExecContext* = nullptr) override {
    return all_gather_from(nullptr, buf, n, dtype);
  }
  // shard == nullptr: in place (all_gather).
  Work all_gather_from(const void* shard, void* buf, std::int64_t n, DType dtype,
                       const ExecContext* issuing_stream = nullptr) override;
  Work all_reduce_f64(double* buf, std::int64_t n) override;
  Work then(std::function<void(const ExecContext& stream)> fn) override;
  // A continuation that does nothing: the issuing thread produced its data before the call.
  Work no_op(const ExecContext* = nullptr) override {
    return then([](const ExecContext&) {});
  }
  void synchronize() override { stream_->synchronize(); }
  ExecContext exec() const override { return ExecContext{}; }

  CommStats stats() const override {
    std::lock_guard lock(stats_mutex_);
    return stats_;
  }
  void reset_stats() override {
    std::lock_guard lock(stats_mutex_);
    stats_ = CommStats{};
  }
  void set_tracer(Tracer* tracer) override { tracer_ = tracer; }

 private:
  // Runs on the comm thread: waits for `request`, failing after timeout_s.
  void wait_request(MPI_Request& request, const char* what, std::int64_t bytes);
  Work submit(CollectiveOp op, std::int64_t payload_bytes, std::string label,
              std::function<void()> issue_and_wait);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::string name_;
  double timeout_s_;
  Tracer* tracer_ = nullptr;
  mutable std::mutex stats_mutex_;
  CommStats stats_;
  std::vector<char> scatter_scratch_;  // the comm thread's: a reduce-scatter's sum before its copy
  std::unique_ptr<CpuStream> stream_;  // last member: its thread stops before the rest is destroyed
};

}  // namespace zl

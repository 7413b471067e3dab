// MpiCommunicator: MPI collectives on a dedicated comm thread, completed in issue order.
#include "runtime/comm/backends/mpi_communicator.h"

#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "base/bf16.h"
#include "kernels/elementwise.h"
#include "base/errors.h"
#include "runtime/comm/thread_priority.h"
#include "runtime/comm/timed_mpi.h"
#include "base/tracer.h"
#include "runtime/comm/world.h"

namespace zl {
namespace {

class CompletionWork final : public WorkImpl {
 public:
  explicit CompletionWork(std::shared_ptr<Completion> done) : done_(std::move(done)) {}
  void wait() override { done_->wait(); }
  bool is_done() override { return done_->is_done(); }

 private:
  std::shared_ptr<Completion> done_;
};

int checked_count(std::int64_t n, const std::string& comm) {
  if (n < 0 || n > kMaxMpiCount) {
    throw InternalError(fmt::format("communicator {}: count {} does not fit MPI's int", comm, n));
  }
  return static_cast<int>(n);
}

// The first task of every comm thread (thread_priority.h). A refused SCHED_FIFO leaves the
// thread normal; rank 0's main thread reports it (comm_priority_warning).
void prepare_comm_thread(CommPriority priority) {
  tighten_timer_slack();
  if (priority == CommPriority::Realtime) make_current_thread_realtime();
}

// MPI has no bf16: a bf16 element travels as a 2-byte contiguous type, and sums go through a
// user-defined op that adds in fp32 and rounds the partial sum to bf16 (round to nearest even), the
// same arithmetic as NCCL's ncclBfloat16 sum. The op is commutative (rounded fp32 addition is), so
// MPI may pick any algorithm; each partial sum is computed once and passed on, so every rank
// receives the same bits (tests/mpi/test_communicator.cpp checks it).
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const Bf16* a = static_cast<const Bf16*>(in);
  Bf16* b = static_cast<Bf16*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = float_to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
}

struct MpiBf16 {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op sum = MPI_OP_NULL;
};

// Created on first use (a communicator's constructor, after MPI_Init) and kept for the process:
// MPI frees them at MPI_Finalize.
const MpiBf16& mpi_bf16() {
  static const MpiBf16 kBf16 = [] {
    MpiBf16 t;
    ZL_MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &t.type));
    ZL_MPI_CHECK(MPI_Type_commit(&t.type));
    ZL_MPI_CHECK(MPI_Op_create(&bf16_sum, /*commute=*/1, &t.sum));
    return t;
  }();
  return kBf16;
}

MPI_Datatype mpi_type(DType dtype) { return dtype == DType::F32 ? MPI_FLOAT : mpi_bf16().type; }
MPI_Op mpi_sum(DType dtype) { return dtype == DType::F32 ? MPI_SUM : mpi_bf16().sum; }

// ReduceOp::Average divides the fp32 sum of `world` ranks on the host (check_reduce_op keeps it
// off bf16 buffers).
void finish_average(ReduceOp op, void* sum, std::int64_t n, int world) {
  if (op == ReduceOp::Average && world > 1) {
    scale(ExecContext{}, static_cast<float*>(sum), n, 1.0f / world);
  }
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm parent, std::string name, double timeout_s,
                                 CommPriority priority)
    : name_(std::move(name)), timeout_s_(timeout_s) {
  int parent_rank = 0;
  MPI_Comm_rank(parent, &parent_rank);
  comm_ = timed_comm_dup(parent, WaitLimit{parent_rank, timeout_s_},
                         fmt::format("creating communicator '{}'", name_));
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  mpi_bf16();  // creates the bf16 type and op here, on the constructing thread, in rank order
  stream_ = std::make_unique<CpuStream>();
  stream_->enqueue([priority] { prepare_comm_thread(priority); });
}

MpiCommunicator::~MpiCommunicator() {
  stream_.reset();  // drains and joins the comm thread before the communicator goes away
  if (comm_ != MPI_COMM_NULL) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
}

void MpiCommunicator::wait_request(MPI_Request& request, const char* what, std::int64_t bytes) {
  poll_request(request, timeout_s_, [&] {
    return fmt::format(
        "rank {}: {} of {} bytes on communicator '{}' did not complete within "
        "runtime.timeout_s = {} s (a peer rank died, hangs, or issued collectives in another "
        "order)",
        rank_, what, bytes, name_, timeout_s_);
  });
}

Work MpiCommunicator::submit(CollectiveOp op, std::int64_t payload_bytes, std::string label,
                             std::function<void()> issue_and_wait) {
  auto task = [this, op, payload_bytes, label = std::move(label),
               issue_and_wait = std::move(issue_and_wait)] {
    const double begin_us = tracer_ ? tracer_->now_us() : 0.0;
    const auto start = std::chrono::steady_clock::now();
    {
      // On the comm thread, which is this communicator's stream (base/stream_timeline.h).
      TimelineScope timed(tracer_ ? &tracer_->timeline() : nullptr, ExecContext{}, name_, label);
      issue_and_wait();
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    {
      std::lock_guard lock(stats_mutex_);
      stats_.ops += 1;
      stats_.payload_bytes += payload_bytes;
      stats_.wire_bytes += wire_bytes(op, payload_bytes, size_);
      stats_.busy_seconds += seconds;
    }
    if (tracer_ && tracer_->enabled()) {
      tracer_->span(name_, label, begin_us, tracer_->now_us(),
                    {{"op", collective_name(op)}, {"bytes", payload_bytes}});
    }
  };
  return Work(std::make_shared<CompletionWork>(stream_->enqueue(std::move(task))));
}

// The issuing stream needs no ordering on the CPU: the caller produced the buffer before calling.
Work MpiCommunicator::all_reduce(void* buf, std::int64_t n, DType dtype, ReduceOp op,
                                 const ExecContext*) {
  const int count = checked_count(n, name_);
  check_reduce_op(dtype, op, name_);
  const std::int64_t bytes = n * dtype_size(dtype);
  const auto issue_and_wait = [this, buf, n, count, dtype, op, bytes] {
    MPI_Request req;
    ZL_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, count, mpi_type(dtype), mpi_sum(dtype), comm_,
                                &req));
    wait_request(req, "all_reduce", bytes);
    finish_average(op, buf, n, size_);
  };
  return submit(CollectiveOp::AllReduce, bytes, "all_reduce", issue_and_wait);
}

Work MpiCommunicator::reduce(void* buf, std::int64_t n, DType dtype, int root, ReduceOp op,
                             const ExecContext*) {
  const int count = checked_count(n, name_);
  check_reduce_op(dtype, op, name_);
  const std::int64_t bytes = n * dtype_size(dtype);
  const auto issue_and_wait = [this, buf, n, count, dtype, root, op, bytes] {
    MPI_Request req;
    // The root reduces in place; other ranks only send, their buffer stays as it was.
    const void* send = rank_ == root ? MPI_IN_PLACE : buf;
    void* recv = rank_ == root ? buf : nullptr;
    ZL_MPI_CHECK(MPI_Ireduce(send, recv, count, mpi_type(dtype), mpi_sum(dtype), root, comm_,
                             &req));
    wait_request(req, "reduce", bytes);
    if (rank_ == root) finish_average(op, buf, n, size_);
  };
  return submit(CollectiveOp::Reduce, bytes, "reduce", issue_and_wait);
}

Work MpiCommunicator::broadcast(void* buf, std::int64_t n, DType dtype, int root,
                                const ExecContext*) {
  const int count = checked_count(n, name_);
  const std::int64_t bytes = n * dtype_size(dtype);
  const auto issue_and_wait = [this, buf, count, dtype, root, bytes] {
    MPI_Request req;
    ZL_MPI_CHECK(MPI_Ibcast(buf, count, mpi_type(dtype), root, comm_, &req));
    wait_request(req, "broadcast", bytes);
  };
  return submit(CollectiveOp::Broadcast, bytes, "broadcast", issue_and_wait);
}

// MPI's in-place reduce-scatter leaves the rank's sum at the *start* of the buffer and may use the
// rest as scratch; the contract wants it at the rank's own shard with the rest unchanged, and the
// send buffer may not overlap the receive buffer. So the sum lands in a scratch shard owned by the
// comm thread (reused; grown to the largest shard) and is copied into place. bf16 sums go through
// the same fp32-accumulating op as the all-reduce.
Work MpiCommunicator::reduce_scatter(void* buf, std::int64_t n, DType dtype, ReduceOp op,
                                     const ExecContext*) {
  const std::int64_t shard = shard_numel(n, size_, name_);
  const int count = checked_count(shard, name_);
  check_reduce_op(dtype, op, name_);
  const std::int64_t bytes = n * dtype_size(dtype);
  const auto issue_and_wait = [this, buf, shard, count, dtype, op, bytes] {
    // One rank's shard is the whole buffer and its sum is itself: Open MPI would still copy it
    // out and back through temporaries, at memory speed.
    if (size_ == 1) return;
    const auto shard_bytes = static_cast<std::size_t>(shard * dtype_size(dtype));
    if (scatter_scratch_.size() < shard_bytes) scatter_scratch_.resize(shard_bytes);
    MPI_Request req;
    ZL_MPI_CHECK(MPI_Ireduce_scatter_block(buf, scatter_scratch_.data(), count, mpi_type(dtype),
                                           mpi_sum(dtype), comm_, &req));
    wait_request(req, "reduce_scatter", bytes);
    char* mine = static_cast<char*>(buf) + rank_ * shard_bytes;
    if (shard_bytes > 0) std::memcpy(mine, scatter_scratch_.data(), shard_bytes);
    finish_average(op, mine, shard, size_);
  };
  return submit(CollectiveOp::ReduceScatter, bytes, "reduce_scatter", issue_and_wait);
}

Work MpiCommunicator::all_gather_from(const void* shard, void* buf, std::int64_t n, DType dtype,
                                      const ExecContext*) {
  const int count = checked_count(shard_numel(n, size_, name_), name_);
  const std::int64_t bytes = n * dtype_size(dtype);
  const auto* whole = static_cast<const char*>(buf);
  const auto* mine = static_cast<const char*>(shard);
  ZL_CHECK(shard == nullptr || mine + count * dtype_size(dtype) <= whole || mine >= whole + bytes,
           "communicator {}: all_gather_from's shard overlaps its buffer", name_);
  const auto issue_and_wait = [this, shard, buf, count, dtype, bytes] {
    if (shard == nullptr && size_ == 1) return;  // buf already is the whole
    MPI_Request req;
    // In place (shard == nullptr): this rank's contribution is already in buf.
    ZL_MPI_CHECK(MPI_Iallgather(shard ? shard : MPI_IN_PLACE, shard ? count : 0,
                                shard ? mpi_type(dtype) : MPI_DATATYPE_NULL, buf, count,
                                mpi_type(dtype), comm_, &req));
    wait_request(req, "all_gather", bytes);
  };
  return submit(CollectiveOp::AllGather, bytes, "all_gather", issue_and_wait);
}

Work MpiCommunicator::all_reduce_f64(double* buf, std::int64_t n) {
  const int count = checked_count(n, name_);
  const auto issue_and_wait = [this, buf, n, count] {
    MPI_Request req;
    ZL_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, count, MPI_DOUBLE, MPI_SUM, comm_, &req));
    wait_request(req, "all_reduce_f64", n * 8);
  };
  return submit(CollectiveOp::AllReduce, n * 8, "all_reduce_f64", issue_and_wait);
}

Work MpiCommunicator::then(std::function<void(const ExecContext& stream)> fn) {
  // On the comm thread, after every operation enqueued before: the CPU meaning of a continuation.
  return Work(std::make_shared<CompletionWork>(
      stream_->enqueue([fn = std::move(fn)] { fn(ExecContext{}); })));
}

}  // namespace zl

// NcclCommunicator: NCCL collectives on a comm stream, ordered after the issuing stream by events,
// each completing as an event that the host can wait for with a timeout or a stream can wait on.
#if defined(ZEROLAP_WITH_CUDA)

#include "runtime/comm/backends/nccl_communicator.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <utility>

#include <fmt/format.h>

#include "runtime/comm/backends/nccl_check.h"
#include "base/errors.h"
#include "runtime/comm/link/simulated_link.h"
#include "base/poll.h"
#include "runtime/comm/timed_mpi.h"
#include "base/tracer.h"
#include "runtime/comm/world.h"

namespace zl {

struct NcclCommunicator::Event {
  cudaEvent_t event = nullptr;
  explicit Event(bool timing) {
    ZL_CUDA_CHECK(
        cudaEventCreateWithFlags(&event, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~Event() {
    if (event != nullptr) cudaEventDestroy(event);  // fine while pending: freed once it completes
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

struct NcclCommunicator::Shared {
  ncclComm_t comm = nullptr;
  std::string name;
  int rank = 0;
  double timeout_s = 0.0;
  bool aborted = false;

  // After a timeout or an asynchronous NCCL error, more collectives could only hang: abort ends
  // the pending NCCL kernels and makes the communicator unusable.
  void abort() noexcept {
    if (!aborted && comm != nullptr) ncclCommAbort(comm);
    aborted = true;
  }

  void check_async_error() {
    if (aborted || comm == nullptr) return;
    ncclResult_t state = ncclSuccess;
    ZL_NCCL_CHECK(ncclCommGetAsyncError(comm, &state));
    if (state == ncclSuccess || state == ncclInProgress) return;
    const std::string text = ncclGetErrorString(state);
    abort();
    throw RuntimeFailure(fmt::format(
        "rank {}: NCCL communicator '{}' failed asynchronously: {} (a peer rank or the network "
        "failed; NCCL_DEBUG=INFO says more)",
        rank, name, text));
  }

  // Note [Non-blocking NCCL]: the communicator is created non-blocking (ncclConfig_t::blocking =
  // 0), so that its init, which waits for every peer, returns at once and is polled here against
  // runtime.timeout_s: a peer that died or stopped during start-up is an error naming the phase,
  // and ncclCommAbort frees what the init holds. A non-blocking communicator may answer any call
  // with ncclInProgress; the next call must wait until ncclCommGetAsyncError says it is done.
  // `phase` names the call for the timeout message.
  void settle(ncclResult_t issued, const std::string& phase) {
    if (issued != ncclInProgress) {
      ZL_NCCL_CHECK(issued);
      return;
    }
    ncclResult_t state = ncclInProgress;
    poll_until(
        [&] {
          ZL_NCCL_CHECK(ncclCommGetAsyncError(comm, &state));
          return state != ncclInProgress;
        },
        timeout_s,
        [&] {
          abort();
          return fmt::format(
              "rank {}: {} of NCCL communicator '{}' did not complete within runtime.timeout_s = "
              "{} s (a peer rank died, stopped or never started it); the communicator was aborted",
              rank, phase, name, timeout_s);
        });
    if (state != ncclSuccess) {
      const std::string text = ncclGetErrorString(state);
      abort();
      throw RuntimeFailure(fmt::format("rank {}: {} of NCCL communicator '{}' failed: {} "
                                       "(NCCL_DEBUG=INFO says more)",
                                       rank, phase, name, text));
    }
  }

  // Waits on the host for `event` (recorded on the comm stream after `what`).
  void wait(cudaEvent_t event, const std::string& what) {
    int polls = 0;
    poll_until(
        [&] {
          const cudaError_t q = cudaEventQuery(event);
          if (q == cudaSuccess) return true;
          if (q != cudaErrorNotReady) ZL_CUDA_CHECK(q);
          if (aborted) {
            throw RuntimeFailure(fmt::format(
                "rank {}: {} on NCCL communicator '{}' cannot complete: the communicator was "
                "aborted after an earlier failure",
                rank, what, name));
          }
          if (++polls % 256 == 0) check_async_error();
          return false;
        },
        timeout_s,
        [&] {
          abort();
          return fmt::format(
              "rank {}: {} on NCCL communicator '{}' did not complete within runtime.timeout_s = "
              "{} s (a peer rank died, hangs, or issued collectives in another order); the "
              "communicator was aborted",
              rank, what, name, timeout_s);
        });
  }
};

namespace {

class NcclWork final : public WorkImpl {
 public:
  NcclWork(std::shared_ptr<NcclCommunicator::Shared> shared,
           std::shared_ptr<NcclCommunicator::Event> done, std::string what,
           std::function<void()> on_complete)
      : shared_(std::move(shared)),
        done_(std::move(done)),
        what_(std::move(what)),
        on_complete_(std::move(on_complete)) {}

  void wait() override {
    if (finished_) return;
    shared_->wait(done_->event, what_);
    finish();
  }

  bool is_done() override {
    if (finished_) return true;
    const cudaError_t q = cudaEventQuery(done_->event);
    if (q == cudaErrorNotReady) return false;
    ZL_CUDA_CHECK(q);
    finish();
    return true;
  }

  void stream_wait(const ExecContext& exec) override {
    // A result bound for host memory (all_reduce_f64), or a CPU consumer, needs the host to wait.
    if (exec.device != DeviceKind::Cuda || on_complete_) {
      wait();
      return;
    }
    // An event wait instead of a host sync: exec.stream waits on the GPU, the host moves on.
    ZL_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(exec.stream), done_->event, 0));
  }

 private:
  void finish() {
    finished_ = true;
    if (on_complete_) std::exchange(on_complete_, nullptr)();
  }

  std::shared_ptr<NcclCommunicator::Shared> shared_;
  std::shared_ptr<NcclCommunicator::Event> done_;
  std::string what_;
  std::function<void()> on_complete_;
  bool finished_ = false;
};

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::Sum ? ncclSum : ncclAvg; }
// bf16 sums: NCCL adds in fp32 and rounds each partial sum to bf16, as the MPI op does.
ncclDataType_t nccl_type(DType dtype) { return dtype == DType::F32 ? ncclFloat : ncclBfloat16; }

std::size_t checked_count(std::int64_t n, const std::string& comm) {
  if (n < 0) throw InternalError(fmt::format("communicator {}: negative count {}", comm, n));
  return static_cast<std::size_t>(n);
}

}  // namespace

NcclCommunicator::NcclCommunicator(MPI_Comm parent, std::string name, double timeout_s,
                                   ExecContext compute)
    : name_(std::move(name)),
      timeout_s_(timeout_s),
      compute_stream_(static_cast<cudaStream_t>(compute.stream)) {
  ZL_CHECK(compute.device == DeviceKind::Cuda && compute.stream != nullptr,
           "NcclCommunicator '{}' needs a CUDA compute stream", name_);
  ZL_MPI_CHECK(MPI_Comm_rank(parent, &rank_));
  ZL_MPI_CHECK(MPI_Comm_size(parent, &size_));
  ncclUniqueId id{};
  if (rank_ == 0) ZL_NCCL_CHECK(ncclGetUniqueId(&id));
  timed_bcast(&id, sizeof(id), MPI_BYTE, 0, parent, WaitLimit{rank_, timeout_s_},
              fmt::format("broadcasting the NCCL id of communicator '{}'", name_));

  shared_ = std::make_shared<Shared>(Shared{.name = name_, .rank = rank_, .timeout_s = timeout_s_});
  // The init waits for every peer; polled, it has a deadline (Note [Non-blocking NCCL]).
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t issued = ncclCommInitRankConfig(&shared_->comm, size_, id, rank_, &config);
  if (issued != ncclSuccess && issued != ncclInProgress) shared_->abort();  // settle() throws it
  shared_->settle(issued, "the init (ncclCommInitRankConfig)");

  // After the init, whose failure throws out of this constructor: no destructor runs to free
  // what a constructor that throws made, so a failure here aborts the communicator and frees what
  // it made itself. Highest priority: a collective's few blocks should not queue behind a backlog
  // of compute kernels, since every peer waits for this rank's part.
  try {
    int least = 0, greatest = 0;
    ZL_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    ZL_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest));
    ZL_CUDA_CHECK(cudaEventCreateWithFlags(&issued_, cudaEventDisableTiming));
    reserve_f64_staging(2 * static_cast<std::int64_t>(size_));
  } catch (...) {
    shared_->abort();
    free_cuda_resources();
    throw;
  }
}

// Best effort and silent: it runs in the destructor and while a constructor's failure unwinds.
void NcclCommunicator::free_cuda_resources() noexcept {
  pending_timings_.clear();
  if (f64_host_ != nullptr) cudaFreeHost(f64_host_);
  if (f64_device_ != nullptr) cudaFree(f64_device_);
  if (issued_ != nullptr) cudaEventDestroy(issued_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

// Sized up front for the step's verdict (2 x world doubles, step_verdict.cpp) and the evaluation's
// sums: a cudaFree or pinned allocation mid-run may synchronise the device while another
// communicator's kernels are in flight, which NCCL warns can deadlock. Grows only for a larger
// caller, after the previous call's Work was waited.
void NcclCommunicator::reserve_f64_staging(std::int64_t n) {
  if (n <= f64_capacity_) return;
  if (f64_host_ != nullptr) ZL_CUDA_CHECK(cudaFreeHost(f64_host_));
  if (f64_device_ != nullptr) ZL_CUDA_CHECK(cudaFree(f64_device_));
  f64_host_ = f64_device_ = nullptr;
  f64_capacity_ = 0;
  const std::int64_t capacity = std::max<std::int64_t>(n, 64);
  ZL_CUDA_CHECK(cudaMallocHost(&f64_host_, static_cast<std::size_t>(capacity) * sizeof(double)));
  ZL_CUDA_CHECK(cudaMalloc(&f64_device_, static_cast<std::size_t>(capacity) * sizeof(double)));
  f64_capacity_ = capacity;
}

NcclCommunicator::~NcclCommunicator() {
  if (shared_) {
    // While an exception unwinds (this rank failed, or a peer did) what is queued may never
    // finish: abort at once rather than wait up to timeout_s to flush it.
    if (std::uncaught_exceptions() > 0) shared_->abort();
    try {
      if (!shared_->aborted) synchronize();
    } catch (...) {
      shared_->abort();
    }
    // See Note [Non-blocking NCCL]. The finalize waits for the peers too, so it is polled with the
    // same deadline (abort on a timeout) before the destroy frees what is local.
    if (!shared_->aborted && shared_->comm != nullptr) {
      try {
        shared_->settle(ncclCommFinalize(shared_->comm), "the finalize (ncclCommFinalize)");
      } catch (...) {
        shared_->abort();
      }
    }
    if (!shared_->aborted && shared_->comm != nullptr) ncclCommDestroy(shared_->comm);
    shared_->comm = nullptr;  // Works that outlive this communicator only query their events
  }
  free_cuda_resources();
}

void NcclCommunicator::check_usable() const {
  if (shared_->aborted) {
    throw RuntimeFailure(fmt::format(
        "rank {}: NCCL communicator '{}' was aborted after an earlier failure", rank_, name_));
  }
}

cudaStream_t NcclCommunicator::issuer_of(const ExecContext* issuing_stream) const {
  return issuing_stream != nullptr ? static_cast<cudaStream_t>(issuing_stream->stream)
                                   : compute_stream_;
}

void NcclCommunicator::follow(cudaStream_t issuer) {
  if (issuer == nullptr || issuer == stream_) return;
  // The data is final on the issuing stream *now* (its producer kernels are enqueued): an event
  // there and a wait on ours, instead of a stream sync, so the host never blocks. Re-recording
  // issued_ later is safe: a wait binds to the record current at the call.
  ZL_CUDA_CHECK(cudaEventRecord(issued_, issuer));
  ZL_CUDA_CHECK(cudaStreamWaitEvent(stream_, issued_, 0));
}

template <typename Launch>
Work NcclCommunicator::enqueue(CollectiveOp op, std::int64_t payload_bytes, const char* label,
                               cudaStream_t issuer, Launch&& launch,
                               std::function<void()> on_complete) {
  check_usable();
  const double modelled_s =
      link_ ? modelled_seconds(link_->config(), op, payload_bytes, link_span_) : 0.0;
  if (modelled_s > timeout_s_) {
    // As on the CPU (simulated_link.cpp): the modelled wait has the deadline of a real one. A
    // wait queued behind the other stream's transfers is bounded by the host's event wait.
    throw RuntimeFailure(fmt::format(
        "rank {}: {} of {} bytes on communicator '{}' would take {:.3g} s on the modelled link, "
        "beyond runtime.timeout_s = {} s ({})",
        rank_, label, payload_bytes, name_, modelled_s, timeout_s_,
        describe_tier(link_->config(), link_span_.tier)));
  }
  const double begin_us = tracer_ ? tracer_->now_us() : 0.0;
  follow(issuer);
  Timing t{std::make_shared<Event>(true), std::make_shared<Event>(true)};
  ZL_CUDA_CHECK(cudaEventRecord(t.start->event, stream_));
  // The stream's own timeline (base/stream_timeline.h): GPU times, after the wait for the data.
  StreamTimeline* timeline =
      tracer_ && tracer_->timeline().recording() ? &tracer_->timeline() : nullptr;
  const StreamTimeline::Mark begin_mark =
      timeline ? timeline->mark(exec()) : StreamTimeline::Mark{};
  // The reservation starts when the stream gets here (Note [Link on the device]), after the wait
  // for the data's producer; the wait holds the stream until the modelled transfer ends.
  if (link_) link_->reserve(stream_, link_slot_, modelled_s);
  launch(stream_);
  if (link_) link_->wait(stream_, link_slot_);
  if (timeline) timeline->span(name_, label, -1, begin_mark, timeline->mark(exec()));
  ZL_CUDA_CHECK(cudaEventRecord(t.end->event, stream_));
  std::shared_ptr<Event> done = t.end;
  {
    std::lock_guard lock(stats_mutex_);
    stats_.ops += 1;
    stats_.payload_bytes += payload_bytes;
    stats_.wire_bytes +=
        wire_bytes(op, payload_bytes, link_ ? link_span_.ranks : size_);
    pending_timings_.push_back(std::move(t));
    harvest_timings();  // keeps the queue short
  }
  if (tracer_ && tracer_->enabled()) {
    tracer_->span(name_, label, begin_us, tracer_->now_us(),
                  {{"op", collective_name(op)}, {"bytes", payload_bytes}, {"clock", "enqueue"}});
  }
  return Work(std::make_shared<NcclWork>(
      shared_, std::move(done), fmt::format("{} of {} bytes", label, payload_bytes),
      std::move(on_complete)));
}

void NcclCommunicator::harvest_timings() const {
  // Events on one stream complete in order: stop at the first one still pending.
  while (!pending_timings_.empty()) {
    const Timing& t = pending_timings_.front();
    const cudaError_t q = cudaEventQuery(t.end->event);
    if (q == cudaErrorNotReady) return;
    ZL_CUDA_CHECK(q);
    float ms = 0.0f;
    ZL_CUDA_CHECK(cudaEventElapsedTime(&ms, t.start->event, t.end->event));
    stats_.busy_seconds += static_cast<double>(ms) * 1e-3;
    pending_timings_.pop_front();
  }
}

Work NcclCommunicator::all_reduce(void* buf, std::int64_t n, DType dtype, ReduceOp op,
                                  const ExecContext* issuing_stream) {
  const std::size_t count = checked_count(n, name_);
  check_reduce_op(dtype, op, name_);
  return enqueue(CollectiveOp::AllReduce, n * dtype_size(dtype), "all_reduce",
                 issuer_of(issuing_stream), [&](cudaStream_t s) {
                   shared_->settle(ncclAllReduce(buf, buf, count, nccl_type(dtype),
                                                 nccl_op(op), shared_->comm, s),
                                   "ncclAllReduce");
                 });
}

Work NcclCommunicator::reduce(void* buf, std::int64_t n, DType dtype, int root, ReduceOp op,
                              const ExecContext* issuing_stream) {
  const std::size_t count = checked_count(n, name_);
  check_reduce_op(dtype, op, name_);
  // In place on the root; NCCL reads recvbuff on the root only, so other ranks' buffers stay.
  return enqueue(CollectiveOp::Reduce, n * dtype_size(dtype), "reduce", issuer_of(issuing_stream),
                 [&](cudaStream_t s) {
                   shared_->settle(ncclReduce(buf, buf, count, nccl_type(dtype), nccl_op(op),
                                              root, shared_->comm, s),
                                   "ncclReduce");
                 });
}

Work NcclCommunicator::broadcast(void* buf, std::int64_t n, DType dtype, int root,
                                 const ExecContext* issuing_stream) {
  const std::size_t count = checked_count(n, name_);
  return enqueue(CollectiveOp::Broadcast, n * dtype_size(dtype), "broadcast",
                 issuer_of(issuing_stream), [&](cudaStream_t s) {
                   shared_->settle(ncclBroadcast(buf, buf, count, nccl_type(dtype), root,
                                                 shared_->comm, s),
                                   "ncclBroadcast");
                 });
}

Work NcclCommunicator::reduce_scatter(void* buf, std::int64_t n, DType dtype, ReduceOp op,
                                      const ExecContext* issuing_stream) {
  const std::int64_t shard = shard_numel(n, size_, name_);
  check_reduce_op(dtype, op, name_);
  void* mine = static_cast<char*>(buf) + rank_ * shard * dtype_size(dtype);
  return enqueue(CollectiveOp::ReduceScatter, n * dtype_size(dtype), "reduce_scatter",
                 issuer_of(issuing_stream), [&](cudaStream_t s) {
                   shared_->settle(ncclReduceScatter(buf, mine, static_cast<std::size_t>(shard),
                                                     nccl_type(dtype), nccl_op(op), shared_->comm,
                                                     s),
                                   "ncclReduceScatter");
                 });
}

Work NcclCommunicator::all_gather(void* buf, std::int64_t n, DType dtype,
                                  const ExecContext* issuing_stream) {
  const std::int64_t shard = shard_numel(n, size_, name_);
  const void* mine = static_cast<const char*>(buf) + rank_ * shard * dtype_size(dtype);
  return all_gather_from(mine, buf, n, dtype, issuing_stream);
}

Work NcclCommunicator::all_gather_from(const void* shard, void* buf, std::int64_t n, DType dtype,
                                       const ExecContext* issuing_stream) {
  const std::int64_t count = shard_numel(n, size_, name_);
  return enqueue(CollectiveOp::AllGather, n * dtype_size(dtype), "all_gather",
                 issuer_of(issuing_stream), [&](cudaStream_t s) {
                   shared_->settle(ncclAllGather(shard, buf, static_cast<std::size_t>(count),
                                                 nccl_type(dtype), shared_->comm, s),
                                   "ncclAllGather");
                 });
}

Work NcclCommunicator::all_reduce_f64(double* buf, std::int64_t n) {
  const std::size_t count = checked_count(n, name_);
  if (count == 0) return Work();
  check_usable();  // after a failed wait the staging stays marked in use: name the failure first
  // The staging is shared by consecutive calls, so the previous result must have been copied out
  // (its Work waited) first; every caller waits at once.
  ZL_CHECK(!*f64_in_use_, "communicator {}: all_reduce_f64 issued before the previous one's Work "
           "was waited", name_);
  reserve_f64_staging(n);
  const std::size_t bytes = count * sizeof(double);
  std::memcpy(f64_host_, buf, bytes);
  double* host = f64_host_;
  double* dev = f64_device_;
  auto in_use = f64_in_use_;
  *in_use = true;
  // Host data needs no event from the issuing stream; the pinned staging makes both copies
  // truly asynchronous, and the Work copies the sums out on the host once they are back.
  return enqueue(
      CollectiveOp::AllReduce, n * 8, "all_reduce_f64", /*issuer=*/nullptr,
      [&](cudaStream_t s) {
        ZL_CUDA_CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s));
        shared_->settle(ncclAllReduce(dev, dev, count, ncclDouble, ncclSum, shared_->comm, s),
                        "ncclAllReduce");
        ZL_CUDA_CHECK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s));
      },
      [buf, host, bytes, in_use] {
        std::memcpy(buf, host, bytes);
        *in_use = false;
      });
}

bool NcclCommunicator::model_link_on_stream(std::shared_ptr<DeviceLink> link, LinkSpan span) {
  link_slot_ = link ? link->claim_slot() : -1;
  link_ = std::move(link);
  link_span_ = span;
  return true;
}

Work NcclCommunicator::record_done(const char* what) {
  auto done = std::make_shared<Event>(false);
  ZL_CUDA_CHECK(cudaEventRecord(done->event, stream_));
  return Work(std::make_shared<NcclWork>(shared_, std::move(done), what, nullptr));
}

Work NcclCommunicator::then(std::function<void(const ExecContext& stream)> fn) {
  check_usable();
  // fn runs now and enqueues its work on (or after) this stream (Note [Callbacks on CUDA]).
  fn(exec());
  return record_done("callback");
}

Work NcclCommunicator::no_op(const ExecContext* issuing_stream) {
  check_usable();
  follow(issuer_of(issuing_stream));
  return record_done("no-op");
}

void NcclCommunicator::synchronize() {
  check_usable();
  record_done("synchronize").wait();
}

CommStats NcclCommunicator::stats() const {
  std::lock_guard lock(stats_mutex_);
  harvest_timings();
  return stats_;
}

void NcclCommunicator::reset_stats() {
  std::lock_guard lock(stats_mutex_);
  stats_ = CommStats{};
  pending_timings_.clear();  // their time belongs to before the reset
}

}  // namespace zl

#endif  // ZEROLAP_WITH_CUDA

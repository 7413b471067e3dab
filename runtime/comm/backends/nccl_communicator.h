// The NCCL backend of the communicator API (CUDA builds only): one ncclComm_t and one comm stream
// per communicator, the unique id broadcast from rank 0 over MPI. A collective is enqueued on the
// comm stream behind an event recorded on its *issuing stream* (the compute stream by default, or
// the stream a continuation was given; communicator.h), so it starts once the data it reads is
// final and the host never blocks; its Work is an event recorded after it. Not thread-safe: every
// call comes from the thread that drives the step (on CUDA no comm threads exist).
//
// Note [Callbacks on CUDA]: on the CPU, then(fn) queues fn on the comm thread, to run after the
// operations before it completed. A CUDA stream cannot run such a host task (cudaLaunchHostFunc
// callbacks may not call CUDA), so here fn runs *at once* on the calling thread and is handed this
// communicator's stream: the kernels fn launches on it and the collectives it issues on another
// communicator with it as their issuing stream are stream-ordered after everything issued here so
// far - the order the CPU comm thread gives, without waiting. Host-side effects of fn (trace
// timestamps, test event notes) therefore happen at issue time, before the work they follow ran.
#pragma once

#if defined(ZEROLAP_WITH_CUDA)

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/comm/communicator.h"

namespace zl {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `parent`: every rank constructs its communicators in the same order. The
  // calling thread's CUDA device must be this rank's GPU (Device sets it). `compute` is the
  // stream whose work collectives issued from outside a callback wait for.
  NcclCommunicator(MPI_Comm parent, std::string name, double timeout_s, ExecContext compute);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

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
  // NCCL's in-place forms: the shard is recvbuff = buf + rank * shard (reduce-scatter) and
  // sendbuff = buf + rank * shard (all-gather).
  Work reduce_scatter(void* buf, std::int64_t n, DType dtype, ReduceOp op,
                      const ExecContext* issuing_stream = nullptr) override;
  Work all_gather(void* buf, std::int64_t n, DType dtype,
                  const ExecContext* issuing_stream = nullptr) override;
  // ncclAllGather of `shard` into buf (all_gather: the rank's shard inside buf).
  Work all_gather_from(const void* shard, void* buf, std::int64_t n, DType dtype,
                       const ExecContext* issuing_stream = nullptr) override;
  Work all_reduce_f64(double* buf, std::int64_t n) override;
  Work then(std::function<void(const ExecContext& stream)> fn) override;
  // An event behind the issuing stream's work and everything issued here, as a collective's.
  Work no_op(const ExecContext* issuing_stream = nullptr) override;
  void synchronize() override;
  // The comm stream. No cuBLAS handle: callbacks run element-wise kernels (the fused optimizer
  // step), never a GEMM.
  ExecContext exec() const override { return ExecContext{DeviceKind::Cuda, stream_, nullptr}; }

  // busy_seconds is GPU time between events around each collective (harvested once complete);
  // trace spans are host *enqueue* times: the host never sees a CUDA collective run.
  CommStats stats() const override;
  void reset_stats() override;
  void set_tracer(Tracer* tracer) override { tracer_ = tracer; }
  // Note [Link on the device] (simulated_link.h): every later collective completes on the comm
  // stream no earlier than the link model says for `span`; wire_bytes counts span.ranks.
  bool model_link_on_stream(std::shared_ptr<DeviceLink> link, LinkSpan span) override;

  struct Shared;  // the ncclComm_t and its abort state, shared with outstanding Works
  struct Event;   // an owned cudaEvent_t

 private:
  // Enqueues `launch` on the comm stream (behind the work issued so far on `issuer`, unless null)
  // between two timing events; returns a Work on the second. on_complete runs on the host once,
  // when the Work is first seen complete.
  template <typename Launch>
  Work enqueue(CollectiveOp op, std::int64_t payload_bytes, const char* label, cudaStream_t issuer,
               Launch&& launch, std::function<void()> on_complete = {});
  // The stream a collective must follow: `issuing_stream`'s, or the compute stream when null.
  cudaStream_t issuer_of(const ExecContext* issuing_stream) const;
  // Makes the comm stream wait for the work enqueued so far on `issuer` (none: null or itself).
  void follow(cudaStream_t issuer);
  // A Work that completes once everything enqueued on the comm stream so far has; `what` names
  // it in a failed wait.
  Work record_done(const char* what);
  void harvest_timings() const;  // finished collectives' GPU time into stats_; stats_mutex_ held
  void check_usable() const;
  void reserve_f64_staging(std::int64_t n);  // all_reduce_f64's staging for n doubles
  void free_cuda_resources() noexcept;       // the comm stream, its events, the f64 staging

  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  double timeout_s_;
  cudaStream_t compute_stream_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<Shared> shared_;
  cudaEvent_t issued_ = nullptr;  // re-recorded on the issuing stream before each collective
  Tracer* tracer_ = nullptr;
  std::shared_ptr<DeviceLink> link_;  // null: no modelled link
  int link_slot_ = -1;
  LinkSpan link_span_;  // this communicator's place on the modelled machine

  // all_reduce_f64 staging: pinned host and device doubles, reused by consecutive calls.
  double* f64_host_ = nullptr;
  double* f64_device_ = nullptr;
  std::int64_t f64_capacity_ = 0;
  std::shared_ptr<bool> f64_in_use_ = std::make_shared<bool>(false);  // until copied out

  struct Timing {
    std::shared_ptr<Event> start, end;
  };
  mutable std::mutex stats_mutex_;
  mutable CommStats stats_;
  mutable std::deque<Timing> pending_timings_;  // in stream order
};

}  // namespace zl

#endif  // ZEROLAP_WITH_CUDA

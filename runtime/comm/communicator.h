// The communicator API: asynchronous collectives on flat float buffers, each returning a Work.
// This comment is the contract of every backend; docs/design.md ("The communicator contract")
// explains why it has this shape.
//
// - Order: operations on one communicator run in issue order on its stream (CPU: a comm thread;
//   CUDA: the comm stream). Every rank must issue the same collectives on a communicator in the
//   same order (docs/design.md invariant 1): callers issue from deterministic program order, never
//   from completion order. Use one communicator per independent sequence of collectives.
// - Issuing stream: a collective reads its buffer once the work issued so far on its *issuing
//   stream* has run. The default (null) is the compute stream the communicator was built with, the
//   stream the model runs on; work issued from a then() continuation passes the continuation's
//   stream instead. CPU: nothing to order (the issuing thread produced the buffer before calling).
// - then(fn) issues fn as a continuation of everything issued on this communicator so far, and
//   passes it the stream it continues (exec()): kernels fn launches go on that stream, and
//   collectives fn issues on *another* communicator pass it as their issuing stream (that is how
//   interleaved ZeRO broadcasts a bucket right after stepping it). What "continuation" means
//   differs by backend, and callers must be correct under both:
//     CPU:  fn runs on the comm thread *after* those operations completed; its host effects
//           (reading results, timestamps) see them done.
//     CUDA: fn runs *at once* on the calling thread, before those operations ran: it may only
//           enqueue stream-ordered work on the stream it is given. Host effects happen at issue
//           time; the returned Work completes when the enqueued work has (Note [Callbacks on
//           CUDA] in nccl_communicator.h).
// - A collective that does not complete within the timeout fails (RuntimeFailure), it never hangs.
// - Float buffers live where the model does (CUDA: device memory); all_reduce_f64's is on the host.
// - Buffers hold n elements of a DType: fp32, or bf16 (docs/design.md, "Precision"). A bf16 sum
//   adds in fp32 and rounds each partial sum to bf16 (MPI: a user-defined op; NCCL: ncclBfloat16);
//   every rank receives the same bits. ReduceOp::Average is fp32 only (the fused optimizer step
//   folds 1/world into its gradient scale instead).
// - Shards (reduce_scatter, all_gather): a buffer of n elements, n a multiple of size(), is cut
//   into size() equal shards of n / size() elements; rank r's shard is elements
//   [r * n / size(), (r + 1) * n / size()). Both run in place on the full buffer, so a rank's
//   shard is a slice of the bucket it belongs to (docs/design.md, "Element shards");
//   all_gather_from reads the rank's shard from a buffer of its own instead.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/dtype.h"
#include "base/exec_context.h"
#include "runtime/comm/comm_options.h"

namespace zl {

enum class ReduceOp { Sum, Average };
enum class CollectiveOp { AllReduce, Reduce, Broadcast, ReduceScatter, AllGather, HostTask };
const char* collective_name(CollectiveOp op);  // "all_reduce", "reduce", ... (traces)
// The op collective_name() names; InternalError for another name.
CollectiveOp collective_op_named(const std::string& name);

class WorkImpl {
 public:
  virtual ~WorkImpl() = default;
  virtual void wait() = 0;
  virtual bool is_done() = 0;
  // Orders later work on `exec` after this operation. The default blocks the calling thread,
  // which is right on the CPU: there the thread that issues the work *is* its stream. CUDA
  // backends make exec.stream wait for an event instead, so the host never blocks.
  virtual void stream_wait(const ExecContext& /*exec*/) { wait(); }
};

class Work {
 public:
  Work() = default;  // an already complete no-op
  explicit Work(std::shared_ptr<WorkImpl> impl) : impl_(std::move(impl)) {}

  // Blocks the calling thread until the operation completed; rethrows its failure.
  void wait() const {
    if (impl_) impl_->wait();
  }
  bool is_done() const { return !impl_ || impl_->is_done(); }
  // Makes work issued on `exec` from now on start after the operation (see WorkImpl::stream_wait);
  // rethrows its failure where the wait is on the host.
  void stream_wait(const ExecContext& exec) const {
    if (impl_) impl_->stream_wait(exec);
  }

 private:
  std::shared_ptr<WorkImpl> impl_;
};

// Per-communicator accounting, for `plan`, the bench and the trace.
struct CommStats {
  std::int64_t ops = 0;
  std::int64_t payload_bytes = 0;  // bytes of the buffers handed to collectives
  // Bytes each rank sends with a ring/chain algorithm (see wire_bytes()).
  std::int64_t wire_bytes = 0;
  double busy_seconds = 0.0;  // time the stream spent inside collectives
};

// Bytes one rank sends for a collective of `payload` bytes on `world` ranks with bandwidth-optimal
// ring/chain algorithms: all-reduce 2(p-1)/p, reduce, broadcast, reduce-scatter and all-gather
// (p-1)/p each (so a reduce then a broadcast, or a reduce-scatter then an all-gather, moves what
// one all-reduce does, and an all-reduce then a broadcast moves 1.5x). `payload` of a
// reduce-scatter or an all-gather is the whole buffer, all shards.
std::int64_t wire_bytes(CollectiveOp op, std::int64_t payload, int world);

// Throws InternalError for ReduceOp::Average on a bf16 buffer (see the contract above).
void check_reduce_op(DType dtype, ReduceOp op, const std::string& comm);
// The shard length n / world of a sharded collective; InternalError unless n >= 0 is a multiple of
// world (the shard layout pads every bucket so that it is).
std::int64_t shard_numel(std::int64_t n, int world, const std::string& comm);

class Tracer;
class DeviceLink;

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;

  // `issuing_stream`: where `buf` was produced (see the contract above); null: the compute stream.
  // Every override repeats the null default, so a call means the same through any static type.
  virtual Work all_reduce(void* buf, std::int64_t n, DType dtype, ReduceOp op,
                          const ExecContext* issuing_stream = nullptr) = 0;
  // After completion only `root`'s buffer holds the result; other ranks' buffers are unchanged.
  virtual Work reduce(void* buf, std::int64_t n, DType dtype, int root, ReduceOp op,
                      const ExecContext* issuing_stream = nullptr) = 0;
  virtual Work broadcast(void* buf, std::int64_t n, DType dtype, int root,
                         const ExecContext* issuing_stream = nullptr) = 0;
  // In place on all n elements (see "Shards" above): after completion this rank's shard holds the
  // sum over ranks of that shard; the rest of buf is left as it was (so zero padding stays zero).
  virtual Work reduce_scatter(void* buf, std::int64_t n, DType dtype, ReduceOp op,
                              const ExecContext* issuing_stream = nullptr) = 0;
  // In place on all n elements: each rank contributes its own shard of buf (the rest of its buf
  // is ignored); after completion every rank's buf holds every rank's shard.
  virtual Work all_gather(void* buf, std::int64_t n, DType dtype,
                          const ExecContext* issuing_stream = nullptr) = 0;
  // As all_gather, with this rank's contribution read from `shard` (n / size() elements, apart
  // from buf) instead of from its place in buf: the collective copies it there (MPI's comm
  // thread, NCCL's kernel), so the issuing stream need not (ZeRO stage 3's gathers). The shard
  // must stay unchanged until the returned Work completes.
  virtual Work all_gather_from(const void* shard, void* buf, std::int64_t n, DType dtype,
                               const ExecContext* issuing_stream = nullptr) = 0;
  // The fp32 forms. (Backends add `using Communicator::all_reduce;` etc. so these stay visible.)
  Work all_reduce(float* buf, std::int64_t n, ReduceOp op,
                  const ExecContext* issuing_stream = nullptr) {
    return all_reduce(buf, n, DType::F32, op, issuing_stream);
  }
  Work reduce(float* buf, std::int64_t n, int root, ReduceOp op,
              const ExecContext* issuing_stream = nullptr) {
    return reduce(buf, n, DType::F32, root, op, issuing_stream);
  }
  Work broadcast(float* buf, std::int64_t n, int root,
                 const ExecContext* issuing_stream = nullptr) {
    return broadcast(buf, n, DType::F32, root, issuing_stream);
  }
  // Sum of doubles (gradient-norm partial sums, metrics); small, and in *host* memory on every
  // backend (NCCL stages it through the device). The result is in buf once the Work is waited.
  virtual Work all_reduce_f64(double* buf, std::int64_t n) = 0;
  // The continuation of everything issued so far; fn gets the stream it continues (see the
  // contract above: CPU after completion on the comm thread, CUDA at once, stream-ordered).
  virtual Work then(std::function<void(const ExecContext& stream)> fn) = 0;
  // An operation that moves nothing and involves no peer, ordered as a collective is: after
  // everything issued on this communicator so far and after the work issued so far on its issuing
  // stream (null: the compute stream; CUDA: an event wait, as a collective's; CPU: nothing to
  // order, see above). The compute-only bench twin (compute_only_communicator.h) issues it for
  // each collective, so a continuation behind it waits for the data a real collective would read.
  virtual Work no_op(const ExecContext* issuing_stream = nullptr) = 0;
  // Waits for everything issued so far.
  virtual void synchronize() = 0;

  // The stream continuations run on, the one then() passes to fn (CPU: the comm thread itself;
  // CUDA: the comm stream).
  virtual ExecContext exec() const = 0;

  virtual CommStats stats() const = 0;
  virtual void reset_stats() = 0;
  virtual void set_tracer(Tracer* tracer) = 0;  // nullable; spans named per collective

  // The simulated link on a device stream (Note [Link on the device], simulated_link.h): a
  // backend whose collectives run on a device stream delays each one's completion there, timed
  // for `span` (link_span), and returns true; the others return false (the link then wraps them
  // in host tasks).
  virtual bool model_link_on_stream(std::shared_ptr<DeviceLink> /*link*/, LinkSpan /*span*/) {
    return false;
  }
};

}  // namespace zl

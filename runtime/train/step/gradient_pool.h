// ZeRO stage 2's gradients (parallel.zero_stage = 2, docs/design.md "Element shards"): between
// steps a rank keeps only its fp32 gradient shard of every bucket; backward writes a bucket's
// gradients into a bucket-sized buffer of a small pool, and the buffer returns to the pool once
// the bucket's reduce-scatter completed and the received shard was added into the rank's shard.
//
// Note [Gradient pool]: kGradientPoolBuffers (2, or one per bucket when fewer) buffers of the
// largest bucket, fp32 (plus a bf16 twin with reduce_dtype = "bf16", the collective's wire).
// Bucket b always takes buffer b mod P, so every parameter's gradient is bound once
// (ParameterStore::bind_gradient) and the assignment is the same on every rank. Two buffers hold
// the bucket backward is writing and the one being reduce-scattered. Before backward first writes
// a gradient of bucket b (the grad-write hook, models/tape.h) its buffer's last user - bucket
// b - P of this backward, or a bucket of the previous one - must have been reduce-scattered and
// accumulated: backward waits for that (a "wait" span on the compute stream, as the forward's
// waits for all-gathers; CUDA: a stream wait). It never deadlocks: a node writes the gradients of
// at most two adjacent buckets, so when it starts, every bucket up to b - 2 was final and, the
// reducer starting collectives in bucket order as soon as they are complete, already issued; the
// wait only ever waits for an issued collective (checked: an unissued one is an InternalError,
// not a hang). A buffer reused by another bucket holds that bucket's gradients where this one has
// padding, so the padding of the bucket is zeroed right after the wait: the shard's padding stays
// zero and adds nothing to the norm. With train.grad_accum > 1 every micro-batch is
// reduce-scattered and accumulated into the shard (the first one overwrites it).
#pragma once

#include <cstdint>
#include <vector>

#include "base/device_buffer.h"
#include "base/exec_context.h"
#include "models/parameter_store.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/train/step/rank_optimizer.h"
#include "runtime/train/step/step_context.h"

namespace zl {

class GradientPool {
 public:
  // Binds every parameter's gradient of the step's store (GradientStorage::Bound) into the buffer
  // of its bucket. `rank`: whose shard this rank keeps (ModePlan::stepped_range).
  GradientPool(const StepContext& step, int rank);

  int buffers() const { return static_cast<int>(slots_.size()); }
  int buffer_of(int bucket) const { return bucket % buffers(); }

  // A backward begins: its first reduce-scatter of each bucket overwrites the shard (the step's
  // first micro-batch) or adds to it (the later ones).
  void begin_backward(Accumulate into_shard);
  // Before backward writes parameter `param_id`'s gradient: the first time in this backward for
  // its bucket, wait on `compute` until the bucket's buffer is free and zero its padding there.
  void before_grad_write(int param_id, const ExecContext& compute);
  // Bucket b's collective buffer, ready on `compute` (bf16 wire: the cast of the fp32 buffer).
  void* prepare(const Bucket& b, const ExecContext& compute);
  // Right after bucket b's reduce-scatter was issued on `comm`: on its stream, adds the received
  // shard into this rank's gradient shard and frees the buffer. The returned Work completes then.
  Work accumulate_and_release(const Bucket& b, Communicator& comm);

  // This rank's accumulated fp32 gradient of elements `range` of bucket b (inside its shard).
  BucketGradient shard_gradient(const Bucket& b, const ElementRange& range) const;

  // Bytes allocated: the gradient shards and the pool (RankMemory::gradients, gradient_pool).
  std::int64_t shard_bytes() const { return shards_.bytes(); }
  std::int64_t pool_bytes() const;

 private:
  struct Slot {
    DeviceBuffer fp32;  // backward writes here
    DeviceBuffer wire;  // bf16 wire only: the collective's buffer
    Work released;      // after its last user's accumulation (empty: free)
    int user = -1;      // the bucket last given this buffer
    bool issued = true;  // whether that bucket's reduce-scatter was issued
  };
  bool bf16_wire() const { return step_.mode.reduce_dtype == DType::BF16; }

  const StepContext& step_;
  std::vector<Slot> slots_;
  DeviceBuffer shards_;                   // this rank's shard of every bucket, in bucket order
  std::vector<std::int64_t> shard_at_;    // [bucket]: its shard's first element in shards_
  std::vector<ElementRange> shard_of_;    // [bucket]: the stepped range it accumulates
  std::vector<std::vector<ElementRange>> padding_;  // [bucket]: within the bucket, not parameters
  std::vector<char> acquired_;            // [bucket], this backward
  Accumulate into_shard_ = Accumulate::Overwrite;
};

}  // namespace zl

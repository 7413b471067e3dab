// GradientStore: where a step's gradients are reduced from and read back, one of three kinds
// chosen once by ModePlan::gradient_store (docs/design.md "Precision").
// Gradients accumulate in the store's fp32 gradient buffer. With reduce_dtype = "fp32" a bucket's
// collective runs on that slice in place. With "bf16" the bucket's fp32 gradients are cast
// (rounded once, to nearest even) into a bf16 buffer right before its collective - 2 bytes per
// element of the flat layout, the same offsets, allocated on every rank (every rank sends every
// bucket) - and the optimizer and the clip norm read the reduced bf16 gradients there.
// ZeRO stage 2 (parallel.zero_stage = 2): the store has no gradient buffer; backward writes each
// bucket into a buffer of the gradient pool (gradient_pool.h), whose reduce-scatters accumulate
// into this rank's fp32 gradient shard, which the optimizer and the norm read.
#pragma once

#include <cstdint>
#include <memory>

#include "base/device_buffer.h"
#include "base/dtype.h"
#include "base/errors.h"
#include "base/exec_context.h"
#include "kernels/elementwise.h"
#include "models/parameter_store.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/step/gradient_pool.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/train/step/rank_optimizer.h"
#include "runtime/train/step/step_context.h"

namespace zl {

// What hybrid sharding's replica all-reduce runs on for one shard (Note [Replica all-reduce]):
// `data`, elements of `dtype`, in place; with `widened` set (stage 2's fp32 shard under a bf16
// wire) `data` is a bf16 buffer that `widened` is cast into before and back from after.
struct ReplicaOperand {
  void* data = nullptr;
  DType dtype = DType::F32;
  float* widened = nullptr;
};

class GradientStore {
 public:
  // Stage 2 binds the store's gradients into its pool (the store must be GradientStorage::Bound).
  // `rank`: whose shard a pool keeps (ModePlan::stepped_range).
  GradientStore(const StepContext& step, int rank);

  // The dtype of the reduced gradients the step and the norm read: the wire's (reduce_dtype), or
  // fp32 for the stage-2 shard (accumulated in fp32).
  DType dtype() const { return pooled() ? DType::F32 : step_.mode.reduce_dtype; }
  // Bucket b's collective buffer, made ready on `exec` (bf16: the cast of its fp32 gradients,
  // enqueued on exec's stream; fp32: the gradients themselves, nothing to do).
  void* prepare(const Bucket& b, const ExecContext& exec);
  // Right after bucket b's collective `collective` was issued on `comm`: what the bucket's
  // reduction is complete after (stage 2: the shard's accumulation, issued here; else the
  // collective itself).
  Work finish(const Bucket& b, Communicator& comm, Work collective);
  // Elements `range` of bucket b as its reduction left them (the optimizer's and the norm's
  // input), pointing at range.offset; stage 2: within this rank's shard.
  BucketGradient gradient(const Bucket& b, const ElementRange& range) const;
  // Hybrid sharding: the replica all-reduce's operand for `shard`, this rank's shard of bucket b
  // as its group's reduction left it.
  ReplicaOperand replica_operand(const Bucket& b, const ElementRange& shard);
  // Stage 2's pool (kind ShardPool; an InternalError otherwise): the grad-write hook and each
  // backward's start go to it.
  GradientPool& pool() {
    ZL_CHECK(pooled(), "no gradient pool without stage 2 or 3");
    return *pool_;
  }
  // Bytes allocated here: the bf16 buffer (reduce_dtype = "bf16"), or stage 2's shards and pool
  // (and the replica all-reduce's bf16 buffer); with the store's fp32 gradients, what
  // RankMemory::gradients counts.
  std::int64_t bytes() const;
  // The part of bytes() that is stage 2's pool and the replica buffer (RankMemory::gradient_pool).
  std::int64_t pool_bytes() const {
    return (pooled() ? pool_->pool_bytes() : 0) + replica_wire_.bytes();
  }

 private:
  bool pooled() const { return step_.mode.gradient_store == GradientStoreKind::ShardPool; }

  const StepContext& step_;
  DeviceBuffer bf16_;                   // Bf16Wire: total_numel elements
  DeviceBuffer replica_wire_;           // ModePlan::replica_wire_numel elements of bf16
  std::unique_ptr<GradientPool> pool_;  // ShardPool
};

}  // namespace zl

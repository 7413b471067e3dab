// GradientStore: fp32 in place, a bf16 cast, or stage 2's pool (gradient_store.h).
#include "runtime/train/step/gradient_store.h"

#include "base/bf16.h"
#include "base/errors.h"

namespace zl {

GradientStore::GradientStore(const StepContext& step, int rank) : step_(step) {
  const DeviceKind device = step.store.device();
  if (step.mode.gradient_store == GradientStoreKind::Bf16Wire) {
    bf16_ = DeviceBuffer(device, step.store.total_numel(), DType::BF16);
  }
  if (pooled()) pool_ = std::make_unique<GradientPool>(step, rank);
  if (const std::int64_t n = step.mode.replica_wire_numel(step.plan); n > 0) {
    replica_wire_ = DeviceBuffer(device, n, DType::BF16);
  }
}

ReplicaOperand GradientStore::replica_operand(const Bucket& b, const ElementRange& shard) {
  const BucketGradient g = gradient(b, shard);
  if (replica_wire_.bytes() == 0) {
    return ReplicaOperand{.data = const_cast<void*>(g.data), .dtype = g.dtype};
  }
  ZL_CHECK(g.dtype == DType::F32 && shard.numel * 2 <= replica_wire_.bytes(),
           "bucket {}: a shard of {} elements of {} for a replica buffer of {} bytes", b.index,
           shard.numel, dtype_name(g.dtype), replica_wire_.bytes());
  return ReplicaOperand{.data = replica_wire_.raw(),
                        .dtype = DType::BF16,
                        .widened = static_cast<float*>(const_cast<void*>(g.data))};
}

void* GradientStore::prepare(const Bucket& b, const ExecContext& exec) {
  switch (step_.mode.gradient_store) {
    case GradientStoreKind::Fp32: return step_.store.grad() + b.offset;
    case GradientStoreKind::Bf16Wire: {
      Bf16* slice = bf16_.data<Bf16>() + b.offset;
      cast(exec, step_.store.grad() + b.offset, slice, b.numel);
      return slice;
    }
    case GradientStoreKind::ShardPool: return pool_->prepare(b, exec);
  }
  return nullptr;
}

Work GradientStore::finish(const Bucket& b, Communicator& comm, Work collective) {
  if (!pooled()) return collective;  // moved, not copied (a conditional operator would copy)
  return pool_->accumulate_and_release(b, comm);
}

BucketGradient GradientStore::gradient(const Bucket& b, const ElementRange& range) const {
  switch (step_.mode.gradient_store) {
    case GradientStoreKind::Fp32:
      return BucketGradient{.data = step_.store.grad() + range.offset, .dtype = DType::F32};
    case GradientStoreKind::Bf16Wire:
      return BucketGradient{.data = bf16_.data<Bf16>() + range.offset, .dtype = DType::BF16};
    case GradientStoreKind::ShardPool: return pool_->shard_gradient(b, range);
  }
  return {};
}

std::int64_t GradientStore::bytes() const {
  if (pooled()) return pool_->shard_bytes() + pool_bytes();
  return bf16_.bytes();
}

}  // namespace zl

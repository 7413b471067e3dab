// ReduceBuffer: the gradient collectives' buffer, fp32 in place, a bf16 cast, or stage 2's pool
// (reduce_buffer.h).
#include "runtime/train/reduce_buffer.h"

#include "base/bf16.h"

namespace zl {

ReduceBuffer::ReduceBuffer(const ModePlan& mode, const BucketPlan& plan, ParameterStore& store,
                           int rank, Tracer* tracer)
    : store_(store), wire_dtype_(mode.reduce_dtype) {
  if (mode.zero_stage >= 2) {  // stage 3 reduces its gradients as stage 2
    pool_ = std::make_unique<GradientPool>(mode, plan, store, rank, tracer);
  } else if (wire_dtype_ == DType::BF16) {
    bf16_ = DeviceBuffer(store.device(), store.total_numel(), DType::BF16);
  }
}

void* ReduceBuffer::prepare(const Bucket& b, const ExecContext& exec) {
  if (pool_) return pool_->prepare(b, exec);
  if (wire_dtype_ == DType::F32) return store_.grad() + b.offset;
  Bf16* slice = bf16_.data<Bf16>() + b.offset;
  cast(exec, store_.grad() + b.offset, slice, b.numel);
  return slice;
}

Work ReduceBuffer::finish(const Bucket& b, Communicator& comm, Work collective) {
  if (!pool_) return collective;
  return pool_->accumulate_and_release(b, comm);
}

BucketGradient ReduceBuffer::gradient(const Bucket& b, const ElementRange& range) const {
  if (pool_) return pool_->shard_gradient(b, range);
  if (wire_dtype_ == DType::F32) {
    return BucketGradient{.data = store_.grad() + range.offset, .dtype = DType::F32};
  }
  return BucketGradient{.data = bf16_.data<Bf16>() + range.offset, .dtype = DType::BF16};
}

std::int64_t ReduceBuffer::bytes() const {
  if (pool_) return pool_->shard_bytes() + pool_->pool_bytes();
  return bf16_.bytes();
}

}  // namespace zl

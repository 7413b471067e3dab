// ReduceBuffer: the gradient collectives' buffer, fp32 in place or a bf16 cast (reduce_buffer.h).
#include "runtime/train/reduce_buffer.h"

#include "base/bf16.h"

namespace zl {

ReduceBuffer::ReduceBuffer(ParameterStore& store, DType dtype) : store_(store), dtype_(dtype) {
  if (dtype_ == DType::BF16) bf16_ = DeviceBuffer(store.device(), store.total_numel(), DType::BF16);
}

void* ReduceBuffer::prepare(const Bucket& b, const ExecContext& exec) {
  if (dtype_ == DType::F32) return store_.grad() + b.offset;
  Bf16* slice = bf16_.data<Bf16>() + b.offset;
  cast(exec, store_.grad() + b.offset, slice, b.numel);
  return slice;
}

BucketGradient ReduceBuffer::gradient(const Bucket& b) const {
  if (dtype_ == DType::F32)
    return BucketGradient{.data = store_.grad() + b.offset, .dtype = DType::F32};
  return BucketGradient{.data = bf16_.data<Bf16>() + b.offset, .dtype = DType::BF16};
}

}  // namespace zl
